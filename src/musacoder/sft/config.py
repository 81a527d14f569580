"""Configuration of an SFT/RFT run. Every option is documented where it is declared; files are TOML, YAML or JSON.

Defaults follow the paper where it states a value (lr 1e-5, 1 epoch, bf16 where the hardware has it); the rest
are marked as our choice in docs/sft.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from musacoder import config_files
from musacoder.rl.config import LoraConfig, TinyModelConfig


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SFTModelConfig(_Section):
    name_or_path: str | None = Field(
        None, description="Local Hugging Face model directory, the output folder of an earlier `train sft|rft|rl` "
        "(its musacoder.json names the model), or a hub id; unset = a tiny Llama built from `tiny` with the offline "
        "byte-level chat tokenizer (tests, the CPU example).")
    tokenizer: str | None = Field(None, description="Tokenizer path or id; default: the model's own. It must have a "
                                  "chat template.")
    tiny: TinyModelConfig = Field(default_factory=TinyModelConfig, description="Shape of the from-config model.")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Dtype the weights are loaded in; mixed precision is `train.bf16`.")
    lora: LoraConfig | None = Field(None, description="Train LoRA adapters instead of all weights (needs `peft`); "
                                    "the final checkpoint has them merged into the weights.")
    gradient_checkpointing: bool = Field(True, description="Trade compute for memory on long contexts (TRL's "
                                         "default).")


class SFTDataConfig(_Section):
    train: list[str] = Field(default_factory=list, description="Training data: the output folder of a data stage "
                             "(`musacoder data solutions|rft|pipeline`: the rows its musacoder.json names), Parquet "
                             "or JSONL files, directories of them, `save_to_disk` directories, or globs. Rows hold "
                             "`messages` (and `loss_turn`, or an RFT `pool`); see docs/sft.md. One path may be "
                             "given as a string.")

    @field_validator("train", mode="before")
    @classmethod
    def _one_path(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value
    kind: Literal["auto", "sft", "rft"] = Field(
        "auto", description="'sft' = train on each row's `messages`; 'rft' = each epoch draws one member of each "
        "row's `pool` (musacoder.data.rft.draw_epoch); 'auto' = 'rft' when the rows have a `pool` column.")
    max_seq_len: int = Field(4096, ge=8, description="Longest training sequence in tokens. Longer ones keep their "
                             "start (the prompt) and lose the end of the target; rows whose prompt alone fills it "
                             "are dropped (both counted in the log).")
    limit: int | None = Field(None, ge=1, description="Use only the first N rows (smoke runs).")


class SFTTrainConfig(_Section):
    lr: float = Field(1e-5, gt=0, description="Peak AdamW learning rate (paper: 1e-5).")
    epochs: int = Field(1, ge=1, description="Passes over the data (paper: 1). RFT draws a new pool member each "
                        "epoch.")
    batch_size: int = Field(4, ge=1, description="Sequences per device per forward pass.")
    grad_accum: int = Field(1, ge=1, description="Forward passes per optimiser step; effective batch = batch_size "
                            "× grad_accum × devices.")
    lr_scheduler: str = Field("cosine", description="transformers scheduler name: 'cosine', 'linear', "
                              "'constant', ...")
    warmup_steps: int = Field(0, ge=0, description="Linear warm-up steps.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient-norm clip.")
    bf16: Literal["auto"] | bool = Field("auto", description="bf16 mixed precision; 'auto' = on when a CUDA GPU "
                                         "with bf16 is present, off otherwise (CPU).")


class SFTRunConfig(_Section):
    out_dir: str = Field("runs/sft", description="Run directory: checkpoint-N/ (resumable), final/ (the model to "
                         "hand to RL and bench), metrics.jsonl, config.json.")
    seed: int = Field(0, description="Seed of data order, RFT draws, LoRA and the tiny model's init.")
    save_steps: int = Field(0, ge=0, description="Checkpoint every N optimiser steps (0 = at the end of each "
                            "epoch).")
    keep_checkpoints: int = Field(2, ge=1, description="Checkpoints kept on disk (final/ is kept apart).")
    resume: bool | str = Field(True, description="true = continue from the latest checkpoint-N in out_dir when "
                               "there is one, the run's recorded config.json agrees on every key of `RESUME_KEYS` "
                               "and its data.json on the data files' sha256 (else an error naming what differs); "
                               "a path = continue from "
                               "that checkpoint, whatever its settings; false = start fresh (the earlier run's "
                               "checkpoint-N/, final/, adapter/, eval/, metrics.jsonl and musacoder.json are "
                               "removed).")
    logging_steps: int = Field(10, ge=1, description="Log loss, lr and grad norm every N optimiser steps.")
    report_to: list[str] = Field(default_factory=list, description="Extra loggers, e.g. ['tensorboard'] (each "
                                 "must be installed).")
    threads: int | None = Field(None, ge=1, description="torch CPU threads (unset = torch's default).")


class SFTEvalConfig(_Section):
    tasks: str | None = Field(None, description="Held-out kernel tasks: a folder of KernelBench-format task files "
                              "(or a KernelBench root with level folders). Unset = no evaluation.")
    select: list[str] = Field(default_factory=list, description="Globs on task names within `tasks` (empty = all).")
    every: int = Field(0, ge=0, description="Optimiser steps between evaluations; the run is also evaluated before "
                       "its first step and after its last (0 = only then).")
    samples: int = Field(1, ge=1, description="Answers per task (pass@1 is averaged over them).")
    temperature: float = Field(0.0, ge=0, description="Sampling temperature (0 = greedy).")
    max_new_tokens: int = Field(1024, ge=1, description="Longest answer.")
    backend: str | None = Field(None, description="MooreEval backend: cuda, triton, cpu or musa; default cuda where a "
                                "CUDA GPU is visible, else cpu.")
    verify: dict[str, Any] = Field(default_factory=dict, description="VerifyConfig fields, e.g. {trials = 3}.")
    workers: int = Field(1, ge=1, description="Parallel verifications.")
    metadata: bool = Field(True, description="Prompts carry the reference's shape/stride/dtype metadata, as the "
                           "data stage's do.")
    six_step: bool = Field(True, description="Prompts ask for the six-step scheme, as the data stage's do.")
    batch_size: int = Field(8, ge=1, description="Prompts generated at once.")
    seed: int = Field(0, description="Base of the sampling seeds.")


class SFTConfig(_Section):
    model: SFTModelConfig = Field(default_factory=SFTModelConfig)
    data: SFTDataConfig = Field(default_factory=SFTDataConfig)
    train: SFTTrainConfig = Field(default_factory=SFTTrainConfig)
    run: SFTRunConfig = Field(default_factory=SFTRunConfig)
    eval: SFTEvalConfig = Field(default_factory=SFTEvalConfig, description="Held-out evaluation during training "
                                "(off unless `eval.tasks` is set); results in metrics.jsonl under `eval/`.")


# Settings that may change between the runs of one folder: how long, how often, where, what is watched. Every other
# key (model, tokenizer, LoRA, dtype, data, optimiser, schedule, precision, seed) shapes what is learned: resuming
# under another value of it would mix two runs in one model. train.epochs is free: more epochs extend a finished run.
FREE_KEYS = frozenset({
    "train.epochs", "model.gradient_checkpointing", "run.out_dir", "run.resume", "run.logging_steps",
    "run.save_steps", "run.keep_checkpoints", "run.report_to", "run.threads",
    "eval.tasks", "eval.every", "eval.samples", "eval.temperature", "eval.max_new_tokens", "eval.batch_size",
    "eval.backend", "eval.verify", "eval.workers", "eval.metadata", "eval.six_step", "eval.select", "eval.seed",
})
PATH_KEYS = ("model.name_or_path", "model.tokenizer", "data.train")


def resume_mismatch(recorded: dict[str, Any], current: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Dotted key → (recorded value, current value) for each key outside `FREE_KEYS` on which two config dumps differ
    (`musacoder.config_files.settings_differences`); paths compare as absolute paths where they exist."""
    return config_files.settings_differences(recorded, current, FREE_KEYS, PATH_KEYS,
                                             defaults=SFTConfig().model_dump(mode="json"),
                                             unused={"model.tiny": "model.name_or_path"})


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> SFTConfig:
    """Read an SFTConfig from .toml, .yaml/.yml or .json; `overrides` maps dotted keys ("train.lr") to values."""
    return config_files.load_config(SFTConfig, path, overrides)
