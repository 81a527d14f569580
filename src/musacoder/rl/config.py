"""Configuration of an RL run. Every option is documented where it is declared; files are TOML, YAML or JSON.

Defaults follow the paper where it states a value (lr 1e-6, grad clip 0.5, group size 8, 64 episodes per step,
temperature 0.9, top-p 0.95, α = 0.75, a KL term, a single-turn warm-up before multi-turn RL with at most 3
responses); where it states none the value is ours, and docs/rl.md's table of defaults says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from musacoder import config_files


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TinyModelConfig(_Section):
    layers: int = Field(2, ge=1, description="Decoder layers of the from-config Llama model.")
    hidden: int = Field(64, ge=8, description="Hidden size.")
    heads: int = Field(4, ge=1, description="Attention heads.")
    intermediate: int = Field(128, ge=8, description="MLP width.")
    max_positions: int = Field(512, ge=16, description="Longest context the model supports.")


class LoraConfig(_Section):
    r: int = Field(16, ge=1, description="LoRA rank (needs `peft`).")
    alpha: int = Field(32, ge=1, description="LoRA alpha.")
    dropout: float = Field(0.0, ge=0, description="LoRA dropout.")
    target_modules: list[str] | str = Field("all-linear", description="Modules to adapt.")


class ModelConfig(_Section):
    name_or_path: str | None = Field(
        None, description="A Hugging Face model folder, the output folder of `train sft|rft|rl` (the model its "
        "musacoder.json names), or a hub id; unset = a tiny Llama built from `tiny`.")
    tokenizer: str | None = Field(
        None, description="'char' (offline CharTokenizer over `env.charset`), or a tokenizer path; default: the "
        "model's own tokenizer, or 'char' for the tiny model.")
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig, description="Shape of the from-config model.")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="Parameter dtype.")
    device: str | None = Field(None, description="'cpu', 'cuda', 'cuda:N'; default cuda when available.")
    lora: LoraConfig | None = Field(None, description="Train LoRA adapters instead of all weights (needs `peft`).")
    gradient_checkpointing: bool = Field(False, description="Trade compute for memory on long contexts.")


class EnvConfig(_Section):
    kind: Literal["toy", "kernel"] = Field("kernel", description="'kernel' = KernelEnv over MooreEval; 'toy' = the "
                                           "letter task of musacoder.rl.toy (smoke tests).")
    tasks: list[str] = Field(default_factory=list, description="Kernel task files, directories or globs.")
    backend: Literal["cpu", "triton", "cuda"] | None = Field(None, description="MooreEval backend for every task.")
    overrides: dict[str, int | float | bool | str] = Field(default_factory=dict,
                                                          description="Task size overrides passed to verify.")
    verify: dict[str, Any] = Field(default_factory=dict, description="VerifyConfig fields, e.g. {trials = 3}.")
    max_workers: int = Field(2, ge=1, description="Verifications in flight at once (threads; each verify spawns "
                             "its own processes, or, with `verifier_url`, waits on the service).")
    verifier_url: str | None = Field(None, description="A `musacoder serve` endpoint (e.g. http://host:8000): "
                                     "verify there through musacoder.client.RemoteVerifier instead of in this "
                                     "process. Raise `max_workers` to keep the service busy.")
    verifier_token: str | None = Field(None, description="Bearer token of `verifier_url`; default "
                                       "$MUSACODER_SERVICE_TOKEN.")
    verifier_timeout_s: float = Field(3600.0, gt=0, description="Longest wait for one remote verdict (queue "
                                      "included); later it is an infra_error, whose group is left out of the loss.")
    toy_letters: str = Field("abcdefgh", description="Toy tasks: letters to ask for.")
    toy_length: int = Field(3, ge=1, description="Toy tasks: answer length.")
    toy_pattern: Literal["repeat", "ascend"] = Field("repeat", description="Toy tasks: 'repeat' = the letter L "
                                                     "times; 'ascend' = the letters from it on, cycling "
                                                     "through toy_letters ('c=' -> 'cdefgh').")
    toy_credit: Literal["share", "prefix", "binary"] = Field("share", description="Toy score: share of right "
                                                             "positions, length of the right prefix / L, or 1 "
                                                             "only for a pass.")
    toy_feedback: Literal["letter", "positions"] = Field("letter", description="Toy feedback: the letter only, or "
                                                         "also the right character at each wrong position.")
    toy_flip_prob: float = Field(0.0, ge=0, le=1, description="Toy reward noise: chance that a score s becomes "
                                 "1 - s (passes stay true).")
    toy_score_noise: float = Field(0.0, ge=0, description="Toy reward noise: std of Gaussian noise added to the "
                                   "score.")
    charset: str | None = Field(None, description="CharTokenizer characters; default: the toy charset for 'toy', "
                                "printable ASCII otherwise.")
    metadata: bool = Field(True, description="Kernel prompts carry the reference's shape/stride/dtype metadata "
                           "(`musacoder.prompts.metadata`), as the SFT/RFT data of `musacoder data` do.")
    six_step: bool = Field(True, description="Kernel prompts ask for the six-step solution scheme, as the SFT/RFT "
                           "data of `musacoder data` do.")
    few_shot: bool = Field(False, description="Kernel prompts carry one worked example (as `bench --few-shot`).")
    eval_tasks: list[str] = Field(default_factory=list, description="Held-out kernel tasks (files, directories, "
                                  "globs) evaluated every `run.eval_every` steps; toy runs evaluate the toy tasks "
                                  "when this is empty.")


class RolloutConfig(_Section):
    engine: Literal["hf", "vllm"] = Field("hf", description="'hf' = transformers generate; 'vllm' when installed "
                                          "(weights are synced into it after every step).")
    temperature: float = Field(0.9, gt=0, description="Sampling temperature; log-probs are of softmax(logits/T).")
    top_p: float = Field(0.95, gt=0, le=1, description="Nucleus sampling.")
    max_new_tokens: int = Field(1024, ge=1, description="Longest response per turn.")
    chunk_size: int = Field(16, ge=1, description="Sequences generated at once; a chunk's verifications start "
                            "while the next chunk is generated.")


class GRPOConfig(_Section):
    group_size: int = Field(8, ge=2, description="Responses sampled per prompt.")
    prompts_per_step: int = Field(8, ge=1, description="Prompts (groups) per step; episodes = this × group_size.")
    clip_low: float = Field(0.2, ge=0, description="ε_low: ratio clipped below at 1 − ε_low.")
    clip_high: float = Field(0.28, ge=0, description="ε_high: ratio clipped above at 1 + ε_high.")
    kl_coef: float = Field(0.001, ge=0, description="β: weight of the k3 KL to the frozen initial policy (0 = off, "
                           "no reference model kept). The paper has a KL term but gives no β; 0.001 is ours.")
    adv_eps: float = Field(1e-6, gt=0, description="ε in A = (r − mean)/(std + ε).")
    epochs: int = Field(2, ge=1, description="Optimisation passes over each batch; passes after the first are "
                        "off-policy, which is where MirrorPop acts.")
    minibatch_size: int = Field(16, ge=1, description="Sequences per optimiser step.")
    micro_batch_size: int = Field(2, ge=1, description="Sequences per forward/backward pass; a minibatch is split "
                                  "into micro batches whose gradients add up to the unsplit minibatch's.")
    logprob_chunk_size: int = Field(1024, ge=1, description="Response positions whose vocabulary-wide logits are "
                                    "materialised at once (per micro batch) when log-probs are computed; each "
                                    "chunk is recomputed in the backward pass instead of kept.")
    lr: float = Field(1e-6, gt=0, description="AdamW learning rate.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    grad_clip: float = Field(0.5, gt=0, description="Gradient-norm clip.")


class MultiTurnConfig(_Section):
    single_turn_steps: int = Field(50, ge=0, description="Steps of single-turn warm-up (stage A) before the "
                                   "multi-turn stage B (the paper's order; its length is unpublished, 50 is ours); "
                                   "0 = multi-turn from the start, >= steps = single-turn only.")
    max_turns: int = Field(3, ge=1, description="Model responses per episode in stage B (early stop on a pass).")
    loss_turns: Literal["first", "all"] = Field("first", description="'first' = PrimeEcho's rule, the loss sees "
                                                "the first response only; 'all' = every response, each from its "
                                                "own context, with the episode's advantage.")


class PrimeEchoConfig(_Section):
    enabled: bool = Field(True, description="Stage B reward = PrimeEcho; off = the last turn's score.")
    alpha: float = Field(0.75, ge=0, le=1, description="Weight of the first turn's score.")
    bonus: list[float] = Field(default_factory=lambda: [0.2, 0.1], description="b_k: bonus when turn k is the "
                               "first to pass (values unpublished).")


class RetryConfig(_Section):
    enabled: bool = Field(True, description="Buffered Dynamic Retry.")
    capacity: int = Field(256, ge=1, description="Buffer size (FIFO; the oldest entry is dropped when full).")
    replay_prob: float = Field(0.1, ge=0, le=1, description="Chance that a batch slot is a replayed repair task.")
    max_replays: int = Field(1, ge=0, description="A replayed prompt whose group fails again is re-buffered at "
                             "most this many times.")


class MirrorPopConfig(_Section):
    enabled: bool = Field(True, description="Drop sequences whose policy drifted too far from the rollout policy.")
    delta: float = Field(0.1, ge=0, description="δ: keep a sequence iff mean_t |log ρ_t| ≤ δ (value unpublished).")
    mode: Literal["abs", "signed"] = Field("abs", description="'abs' = MirrorPop; 'signed' = the signed-mean mask "
                                           "it replaces, for comparison.")


class RunConfig(_Section):
    steps: int = Field(100, ge=1, description="Training steps (one batch of episodes each).")
    seed: int = Field(0, description="Seed of task order, replays, sampling and the tiny model's init.")
    out_dir: str = Field("runs/rl", description="Run directory: config.json, metrics.jsonl, checkpoints/, then "
                         "final/ (adapter/ with LoRA) and the stage manifest musacoder.json.")
    save_every: int = Field(50, ge=0, description="Checkpoint every N steps (0 = only at the end).")
    keep_checkpoints: int = Field(2, ge=1, description="Checkpoints kept on disk.")
    resume: bool | str = Field(True, description="true: continue from the newest checkpoint in out_dir when the "
                               "recorded config.json agrees on every setting that shapes training (else an error "
                               "names the differences); false (--fresh): start over, removing the earlier "
                               "checkpoints and metrics; a checkpoint path: continue from it with the new settings.")
    eval_every: int = Field(0, ge=0, description="Evaluate on env.eval_tasks before training and every N steps "
                            "(0 = never); eval/ keys in metrics.jsonl.")
    eval_samples: int = Field(1, ge=1, description="Samples per held-out task at each evaluation.")
    eval_temperature: float = Field(0.0, ge=0, description="Evaluation sampling temperature (0 = greedy; else with "
                                    "rollout.top_p).")
    tensorboard: bool = Field(False, description="Also log to TensorBoard under tb/ (needs the `tensorboard` "
                              "extra; enabled without it is an error).")
    wandb: bool = Field(False, description="Also log to Weights & Biases (needs the `wandb` extra; enabled without "
                        "it is an error).")
    wandb_project: str = Field("musacoder", description="W&B project; the run is named after out_dir.")
    wandb_mode: Literal["online", "offline"] = Field("offline", description="'offline' writes under "
                                                     "out_dir/wandb (upload later with `wandb sync`); 'online' "
                                                     "needs a login.")
    threads: int | None = Field(None, ge=1, description="torch CPU threads (unset = torch's default).")


class RLConfig(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    grpo: GRPOConfig = Field(default_factory=GRPOConfig)
    multi_turn: MultiTurnConfig = Field(default_factory=MultiTurnConfig)
    primeecho: PrimeEchoConfig = Field(default_factory=PrimeEchoConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    mirrorpop: MirrorPopConfig = Field(default_factory=MirrorPopConfig)
    run: RunConfig = Field(default_factory=RunConfig)


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RLConfig:
    """Read an RLConfig from .toml, .yaml/.yml or .json; `overrides` maps dotted keys ("run.steps") to values."""
    return config_files.load_config(RLConfig, path, overrides)
