"""The embedded GRPO trainer: one process, one machine, torch + transformers.

One step, top to bottom:
  1. build the batch: `prompts_per_step` slots, each a fresh task or (with probability `retry.replay_prob`) the
     oldest Buffered Dynamic Retry entry turned into a repair prompt; each slot is a group of `group_size` episodes;
  2. roll out: single-turn in stage A (`step < multi_turn.single_turn_steps`), up to `max_turns` turns in stage B,
     verifications running on a thread pool while generation continues;
  3. reward: the score (stage A) or PrimeEcho (stage B); group-normalised advantages; groups without signal are
     dropped; groups where every episode failed go into the retry buffer;
  4. optimise for `epochs` passes over the batch (first-turn responses only, by default) in minibatches of
     `minibatch_size` sequences, each split into micro batches of `micro_batch_size` whose gradients add up to the
     minibatch's, popping sequences whose training policy drifted from the rollout policy (MirrorPop);
  5. log metrics (and, every `run.eval_every` steps, pass@1 and speedup on held-out tasks), checkpoint.

Held-out evaluation (`Trainer.evaluate`), over the N first-turn answers to `env.eval_tasks` (`run.eval_samples`
each), P of them passing, and S the speedups of the passing answers MooreEval timed:

    eval/pass_at_1        = P / N                   (share of answers that pass)
    eval/speedup_mean     = mean s over S           (arithmetic mean; None, JSON null, when S is empty)
    eval/speedup_geomean  = exp(mean log s) over S  (geometric mean of the s > 0; None, JSON null, when none)
    eval/score_mean, eval/samples (N), eval/infra_errors, eval/time_s

The names, and None for "nothing timed", are the ones `train sft|rft` logs (`musacoder.sft.evaluate`; its pass@1 is
the mean over tasks of each task's share, the same figure when every task has `run.eval_samples` answers).

The run directory (config record, resume rules, final model, manifest) is `musacoder.rl.rundir`'s.
"""

from __future__ import annotations

import glob
import json
import random
import resource
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from musacoder import config_files
from musacoder.bench.metrics import geomean
from musacoder.rl import rundir
from musacoder.rl.config import RLConfig
from musacoder.rl.env import KernelEnv, make_verifier_pool, verifier_from_config
from musacoder.rl.grpo import clipped_policy_loss, group_has_signal, grpo_advantages
from musacoder.rl.metrics import MetricsLogger, check_sinks
from musacoder.rl.mirrorpop import mirrorpop_keep, sequence_log_ratio_stats
from musacoder.rl.primeecho import primeecho_reward
from musacoder.rl.records import RewardRecord, Sample, Turn, assemble_sample
from musacoder.rl.retry import RetryBuffer, RetryEntry
from musacoder.rl.rollout import HFGenerator, run_episodes
from musacoder.rl.tokenizer import CharTokenizer
from musacoder.rl.toy import TOY_CHARSET, ToyEnv, toy_tasks_from_config

# --- building blocks (the edges: models, tokenizers, task files) -----------------------------------------------------


def model_location(name: str) -> str:
    """What `from_pretrained` loads for `model.name_or_path` (or a tokenizer path): the output folder of a
    training stage (`train sft|rft|rl`, which has a musacoder.json) becomes the model folder its manifest names
    (`musacoder.manifest.resolve_model`); a model folder or a hub id stays as given."""
    from musacoder.manifest import read_manifest, resolve_model

    if Path(name).is_dir() and read_manifest(name) is not None:
        return str(resolve_model(name))
    return name


def build_tokenizer(cfg: RLConfig):
    name = cfg.model.tokenizer or cfg.model.name_or_path or "char"
    if name == "char":
        default = TOY_CHARSET if cfg.env.kind == "toy" else string.printable
        return CharTokenizer(cfg.env.charset or default)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_location(name))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def pick_device(cfg: RLConfig) -> torch.device:
    if cfg.model.device:
        return torch.device(cfg.model.device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def build_policy(cfg: RLConfig, tokenizer):
    """The policy: a local/hub model, or a tiny Llama built from config (random init, seeded)."""
    import transformers

    m = cfg.model
    dtype = getattr(torch, m.dtype)
    if m.name_or_path:
        model = transformers.AutoModelForCausalLM.from_pretrained(model_location(m.name_or_path), dtype=dtype)
    else:
        torch.manual_seed(cfg.run.seed)
        conf = transformers.LlamaConfig(
            vocab_size=len(tokenizer), hidden_size=m.tiny.hidden, intermediate_size=m.tiny.intermediate,
            num_hidden_layers=m.tiny.layers, num_attention_heads=m.tiny.heads, num_key_value_heads=m.tiny.heads,
            max_position_embeddings=m.tiny.max_positions, pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True,
        )
        model = transformers.LlamaForCausalLM(conf).to(dtype)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    if m.lora is not None:
        try:
            import peft
        except ImportError as e:
            raise RuntimeError("model.lora is set but peft is not installed: pip install peft") from e
        model = peft.get_peft_model(model, peft.LoraConfig(
            r=m.lora.r, lora_alpha=m.lora.alpha, lora_dropout=m.lora.dropout, target_modules=m.lora.target_modules,
            task_type="CAUSAL_LM"))
    if m.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    return model.to(pick_device(cfg))


def load_kernel_tasks(patterns: list[str], overrides: dict | None = None) -> list:
    """Task files from paths, directories (their *.py) and globs, loaded with `musacoder.tasks.load_task`."""
    from musacoder.tasks import load_task

    paths: list[str] = []
    for p in patterns:
        if Path(p).is_dir():
            paths += sorted(str(x) for x in Path(p).glob("*.py"))
        else:
            paths += sorted(glob.glob(p)) or [p]
    if not paths:
        raise ValueError("env.tasks is empty: list kernel task files, directories or globs to train on")
    return [load_task(p, overrides=overrides or None) for p in paths]


def _split_lm(model):
    """(decoder, lm_head) of a causal LM whose logits are exactly lm_head(decoder(...).last_hidden_state), else
    None (a model that scales or soft-caps its logits, or does not expose the two). A peft model gives its base
    model's parts, with the adapters in place."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    conf = getattr(base, "config", None)
    if getattr(conf, "final_logit_softcapping", None) or getattr(conf, "logit_scale", None) not in (None, 1, 1.0):
        return None
    get_decoder, get_head = getattr(base, "get_decoder", None), getattr(base, "get_output_embeddings", None)
    if get_decoder is None or get_head is None:
        return None
    decoder, head = get_decoder(), get_head()
    if decoder is None or decoder is base or head is None:
        return None
    return decoder, head


def _chunk_log_probs(head, hidden: torch.Tensor, targets: torch.Tensor, temperature: float):
    """log softmax(head(hidden) / T) at `targets` (= z_target − logsumexp z), and the entropy there (no grad)."""
    logits = head(hidden).float() / temperature
    lse = torch.logsumexp(logits, dim=-1)
    token_logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    with torch.no_grad():  # the entropy is a metric only
        entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return token_logp, entropy


def logits_chunk_bytes(rows: int, positions: int, vocab: int, chunk_size: int | None) -> int:
    """Bytes of one float32 [rows, positions-per-chunk, vocab] logits tensor, the largest tensor the log-prob
    computation materialises (a few of its size exist at once: the scaled logits, the softmax, their product)."""
    per_chunk = positions if chunk_size is None else min(positions, chunk_size)
    return 4 * rows * per_chunk * vocab


def response_log_probs(model, contexts, responses, temperature: float, pad_id: int, chunk_size: int | None = None):
    """log π(response token | context, earlier response tokens) at softmax(logits / T), and the entropy there.

    Rows are right-padded; returns (log_probs [B, T], entropy [B, T]) with T the longest response; padding is 0.

    With `chunk_size`, the vocabulary-wide logits exist for `chunk_size` response positions at a time: the decoder's
    hidden states at the response positions go through the output layer chunk by chunk, each chunk's
    log-softmax-and-gather is checkpointed (recomputed in the backward pass instead of kept), so the float logits
    of the whole batch are never materialised. Models whose logits are not a plain output layer of the hidden
    states (`_split_lm`) take the unchunked path, which computes every position's logits at once."""
    device = next(model.parameters()).device
    lengths = [len(c) + len(r) for c, r in zip(contexts, responses)]
    width, t_max = max(lengths), max(len(r) for r in responses)
    ids = torch.full((len(contexts), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    targets = torch.zeros((len(contexts), t_max), dtype=torch.long)
    for i, (c, r) in enumerate(zip(contexts, responses)):
        ids[i, : lengths[i]] = torch.tensor(list(c) + list(r), dtype=torch.long)
        attention[i, : lengths[i]] = 1
        targets[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    ids, attention, targets = ids.to(device), attention.to(device), targets.to(device)
    # the token at position p is predicted by the output at p − 1
    pos = torch.tensor([len(c) - 1 for c in contexts])[:, None] + torch.arange(t_max)[None, :]
    pos = pos.clamp(max=width - 1).to(device)
    parts = _split_lm(model) if chunk_size is not None else None
    if parts is None:
        logits = model(input_ids=ids, attention_mask=attention).logits
        picked = logits.gather(1, pos.unsqueeze(-1).expand(-1, -1, logits.shape[-1]))
        del logits
        logp = torch.log_softmax(picked.float() / temperature, dim=-1)
        token_logp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            entropy = -(logp.exp() * logp).sum(-1)
        return token_logp, entropy
    decoder, head = parts
    out = decoder(input_ids=ids, attention_mask=attention)
    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    hidden = hidden.gather(1, pos.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))  # [B, T, H]
    outs = []
    for start in range(0, t_max, chunk_size):
        h, t = hidden[:, start:start + chunk_size], targets[:, start:start + chunk_size]
        if torch.is_grad_enabled():
            from torch.utils.checkpoint import checkpoint

            outs.append(checkpoint(_chunk_log_probs, head, h, t, temperature, use_reentrant=False))
        else:
            outs.append(_chunk_log_probs(head, h, t, temperature))
    return torch.cat([o[0] for o in outs], dim=1), torch.cat([o[1] for o in outs], dim=1).detach()


def _vocab_size(model) -> int:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is not None and hasattr(head, "weight"):
        return int(head.weight.shape[0])
    return int(model.config.vocab_size)


def config_record(cfg: RLConfig) -> dict:
    """The settings a run records in config.json: the config with local model/tokenizer paths made absolute (a
    later start from another directory compares equal) and the verifier token left out."""
    record = cfg.model_dump(mode="json")
    for key in ("name_or_path", "tokenizer"):
        record["model"][key] = config_files.normalise_path(record["model"][key])
    if record["env"].get("verifier_token"):
        record["env"]["verifier_token"] = "<set>"
    return record


def memory_metrics(device: torch.device, logits_chunk_bytes_max: int) -> dict:
    """Memory of the step just done: `mem_logits_chunk_bytes` (computed: the largest float32 logits tensor the
    log-probs materialised), `mem_rss_peak_bytes` (measured: the process's peak resident memory so far, which
    never decreases) and, on a CUDA device, `mem_cuda_peak_bytes` (measured: torch's peak allocated memory during
    the step)."""
    out = {"mem_logits_chunk_bytes": logits_chunk_bytes_max,
           "mem_rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}  # Linux: KiB
    if device.type == "cuda":
        out["mem_cuda_peak_bytes"] = torch.cuda.max_memory_allocated(device)
    return out


# --- the trainer ------------------------------------------------------------------------------------------------------


@dataclass
class _Slot:
    task: Any
    entry: RetryEntry | None  # set for a replayed (repair) slot
    prompt: str = ""


@dataclass
class _TrainSeq:
    context_ids: list[int]
    response_ids: list[int]
    rollout_log_probs: list[float]
    advantage: float


class Trainer:
    """GRPO with PrimeEcho, Buffered Dynamic Retry and MirrorPop on one machine.

    `model`, `tokenizer`, `tasks`, `eval_tasks`, `verifier` and `env_factory(max_turns) -> env` can be injected
    (tests); by default they come from the config. Whether the run continues an earlier one in `run.out_dir` is
    decided first (`rundir.start_plan`: a run with other settings there is an error before any model is loaded).
    """

    def __init__(self, config: RLConfig, *, model=None, tokenizer=None, tasks=None, eval_tasks=None, verifier=None,
                 env_factory=None):
        self.cfg = cfg = config
        if cfg.run.threads:
            torch.set_num_threads(cfg.run.threads)
        self.rng = random.Random(cfg.run.seed)
        torch.manual_seed(cfg.run.seed)
        self.out_dir = Path(cfg.run.out_dir)
        check_sinks(cfg.run.tensorboard, cfg.run.wandb)
        record = config_record(cfg)
        plan = rundir.start_plan(self.out_dir, record, cfg.run.resume,
                                 defaults=RLConfig().model_dump(mode="json"))
        self.tokenizer = tokenizer if tokenizer is not None else build_tokenizer(cfg)
        self.model = model if model is not None else build_policy(cfg, self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.ref_model = self._build_reference() if cfg.grpo.kl_coef > 0 else None
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.grpo.lr, weight_decay=cfg.grpo.weight_decay)
        if tasks is not None:
            self.tasks = list(tasks)
        elif cfg.env.kind == "toy":
            self.tasks = toy_tasks_from_config(cfg.env)
        else:
            self.tasks = load_kernel_tasks(cfg.env.tasks, cfg.env.overrides)
        if eval_tasks is not None:
            self.eval_tasks = list(eval_tasks)
        elif cfg.env.eval_tasks:
            self.eval_tasks = load_kernel_tasks(cfg.env.eval_tasks, cfg.env.overrides)
        else:
            self.eval_tasks = list(self.tasks) if cfg.env.kind == "toy" else []
        if cfg.run.eval_every and not self.eval_tasks:
            raise ValueError("run.eval_every is set but there are no held-out tasks: list them in env.eval_tasks")
        self.pool = make_verifier_pool(cfg.env.max_workers)
        self._prompt_cache: dict = {}  # first-turn messages per task, shared by every episode of the run
        self.env_factory = env_factory or self._default_env_factory(verifier)
        self.buffer = RetryBuffer(cfg.retry.capacity, cfg.retry.replay_prob)
        self.generator = self._build_generator()
        self.step_idx = 0
        self._queue: list[int] = []
        self._logits_chunk_bytes = 0
        rundir.prepare(self.out_dir, plan, json.dumps(record, indent=2) + "\n")
        self.model_input = record["model"]["name_or_path"] or "tiny (from config)"
        rundir.write_rl_manifest(self.out_dir, self.model_input, {}, self._manifest_info())
        self.resumed_from = plan.resume_from
        self.resume_changed = plan.changed
        if plan.resume_from is not None:
            self.load_checkpoint(plan.resume_from)

    # --- construction ---
    def _build_reference(self):
        import copy

        if self.cfg.model.lora is not None:
            return None  # the base weights under disabled adapters are the reference
        ref = copy.deepcopy(self.model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref

    def _default_env_factory(self, verifier):
        env_cfg = self.cfg.env
        if env_cfg.kind == "toy":
            return lambda max_turns: ToyEnv(max_turns=max_turns, executor=None)
        if verifier is None:
            verifier = verifier_from_config(env_cfg)  # env.verifier_url: MooreEval through `musacoder serve`
        verify_config = None
        if env_cfg.verify:
            from musacoder import VerifyConfig

            verify_config = VerifyConfig(**env_cfg.verify)
        return lambda max_turns: KernelEnv(
            verifier, backend=env_cfg.backend, overrides=env_cfg.overrides or None, config=verify_config,
            max_turns=max_turns, executor=self.pool, metadata=env_cfg.metadata, six_step=env_cfg.six_step,
            few_shot=env_cfg.few_shot, prompt_cache=self._prompt_cache)

    def _build_generator(self):
        r = self.cfg.rollout
        if r.engine == "vllm":
            from musacoder.rl.rollout import VLLMGenerator

            if not self.cfg.model.name_or_path:
                raise ValueError("rollout.engine = 'vllm' needs model.name_or_path (vLLM loads the model itself)")
            gen = VLLMGenerator(model_location(self.cfg.model.name_or_path), self.tokenizer, r.temperature, r.top_p,
                                r.max_new_tokens)
            gen.sync(self.model)
            return gen
        return HFGenerator(self.model, self.tokenizer, r.temperature, r.top_p, r.max_new_tokens)

    # --- one step ---
    def _next_task(self):
        if not self._queue:
            self._queue = list(range(len(self.tasks)))
            self.rng.shuffle(self._queue)
        return self.tasks[self._queue.pop()]

    def _episode_reward(self, turns: list[Turn], multi_turn: bool) -> RewardRecord:
        scores = [t.outcome.score for t in turns]
        passed = [t.outcome.passed for t in turns]
        if not multi_turn:
            reward = scores[0]
        elif self.cfg.primeecho.enabled:
            reward = primeecho_reward(scores, passed, self.cfg.primeecho.alpha, tuple(self.cfg.primeecho.bonus))
        else:
            reward = scores[-1]
        first_pass = next((k + 1 for k, ok in enumerate(passed) if ok), None)
        return RewardRecord(reward=float(reward), scores=scores, passed=passed,
                            statuses=[t.outcome.status for t in turns], num_turns=len(turns),
                            first_pass_turn=first_pass)

    def rollout(self, multi_turn: bool) -> tuple[list[_Slot], list[Sample]]:
        g = self.cfg.grpo
        max_turns = self.cfg.multi_turn.max_turns if multi_turn else 1
        replays = self.buffer.draw(g.prompts_per_step, self.rng) if self.cfg.retry.enabled else []
        slots = [_Slot(e.task, e, e.prompt) for e in replays]
        slots += [_Slot(self._next_task(), None) for _ in range(g.prompts_per_step - len(slots))]
        envs = []
        for slot in slots:
            for _ in range(g.group_size):
                env = self.env_factory(max_turns)
                prompt = env.reset(slot.task, prompt=env.repair_prompt(slot.entry) if slot.entry else None)
                if slot.entry is None:
                    slot.prompt = prompt
                envs.append(env)
        episodes = run_episodes(self.generator, self.tokenizer, envs, self.cfg.rollout.chunk_size)
        samples = []
        for k, turns in enumerate(episodes):
            slot = slots[k // g.group_size]
            samples.append(assemble_sample(turns, self._episode_reward(turns, multi_turn), group=k // g.group_size,
                                           replay=slot.entry is not None))
        return slots, samples

    def _update_retry_buffer(self, slots: list[_Slot], samples: list[Sample], signal: torch.Tensor,
                             infra: torch.Tensor) -> dict:
        g = self.cfg.grpo.group_size
        stats = {"retry_replays": 0, "retry_recovered": 0, "retry_pushed": 0}
        for gi, slot in enumerate(slots):
            group = samples[gi * g:(gi + 1) * g]
            if slot.entry is not None:
                stats["retry_replays"] += 1
                stats["retry_recovered"] += int(bool(signal[gi]))
            if not self.cfg.retry.enabled or bool(infra[gi]) or any(any(s.reward.passed) for s in group):
                continue  # a group with a verifier fault was not judged: nothing to retry
            if slot.entry is not None and slot.entry.replays >= self.cfg.retry.max_replays:
                continue
            best = max(group, key=lambda s: s.reward.scores[0]).turns[0]
            self.buffer.push(RetryEntry(
                task=slot.task, prompt=slot.prompt, failed_response=best.response_text,
                feedback=best.outcome.feedback, score=best.outcome.score,
                replays=slot.entry.replays + 1 if slot.entry is not None else 0))
            stats["retry_pushed"] += 1
        stats["retry_buffer"] = len(self.buffer)
        return stats

    def _train_sequences(self, samples: list[Sample], advantages: torch.Tensor, signal: torch.Tensor,
                         multi_turn: bool) -> list[_TrainSeq]:
        g = self.cfg.grpo.group_size
        all_turns = multi_turn and self.cfg.multi_turn.loss_turns == "all"
        seqs = []
        for k, s in enumerate(samples):
            if not bool(signal[s.group]):
                continue
            adv = float(advantages[s.group, k % g])
            for t in s.turns if all_turns else s.turns[:1]:
                if t.response_ids:
                    seqs.append(_TrainSeq(t.context_ids, t.response_ids, t.rollout_log_probs, adv))
        return seqs

    def _reference_log_probs(self, batch: list[_TrainSeq]) -> torch.Tensor | None:
        if self.cfg.grpo.kl_coef <= 0:
            return None
        ctx, resp = [s.context_ids for s in batch], [s.response_ids for s in batch]
        with torch.no_grad():
            if self.ref_model is not None:
                lp, _ = response_log_probs(self.ref_model, ctx, resp, self.cfg.rollout.temperature, self.pad_id,
                                           self.cfg.grpo.logprob_chunk_size)
            else:
                with self.model.disable_adapter():
                    lp, _ = response_log_probs(self.model, ctx, resp, self.cfg.rollout.temperature, self.pad_id,
                                               self.cfg.grpo.logprob_chunk_size)
        return lp

    def minibatch_gradients(self, batch: list[_TrainSeq]) -> dict:
        """Accumulate into `.grad` the gradient of one minibatch's loss, micro batch by micro batch, with MirrorPop
        applied to every sequence; returns the minibatch's statistics (sums and counts, see `optimise`).

        The minibatch loss is the token mean over its kept sequences, L = Σ_t ℓ_t m_t / N_kept. Each micro batch
        backpropagates Σ_{t in micro} ℓ_t m_t / N, with N the minibatch's response tokens (known before any
        forward pass); once every micro batch is done the gradients are scaled by N / N_kept (1 when nothing was
        popped), so they equal the unsplit minibatch's whatever `micro_batch_size` is."""
        g, mp = self.cfg.grpo, self.cfg.mirrorpop
        device = next(self.model.parameters()).device
        n_tokens = sum(len(s.response_ids) for s in batch)
        chunk = g.logprob_chunk_size if _split_lm(self.model) is not None else None  # None: unchunked
        st = {"checked": 0, "popped": 0, "popped_signed": 0, "kept_tokens": 0.0, "loss_sum": 0.0,
              "clip_sum": 0.0, "kl_sum": 0.0, "entropy_sum": 0.0, "tokens": float(n_tokens), "log_rho_abs_sum": 0.0}
        for start in range(0, len(batch), g.micro_batch_size):
            micro = batch[start:start + g.micro_batch_size]
            ref = self._reference_log_probs(micro)
            contexts, responses = [s.context_ids for s in micro], [s.response_ids for s in micro]
            logp, entropy = response_log_probs(self.model, contexts, responses, self.cfg.rollout.temperature,
                                               self.pad_id, g.logprob_chunk_size)
            self._logits_chunk_bytes = max(self._logits_chunk_bytes, logits_chunk_bytes(
                len(micro), logp.shape[1], _vocab_size(self.model), chunk))
            t_max = logp.shape[1]
            mask = torch.zeros_like(logp)
            old = torch.zeros_like(logp)
            for i, s in enumerate(micro):
                mask[i, : len(s.response_ids)] = 1.0
                old[i, : len(s.response_ids)] = torch.tensor(s.rollout_log_probs[:t_max], device=device)
            adv = torch.tensor([s.advantage for s in micro], device=device)
            abs_mean, _ = sequence_log_ratio_stats(logp.detach(), old, mask)
            keep_signed = mirrorpop_keep(logp.detach(), old, mask, mp.delta, mode="signed")
            keep = mirrorpop_keep(logp.detach(), old, mask, mp.delta, mode=mp.mode) if mp.enabled else \
                torch.ones(len(micro), dtype=torch.bool, device=device)
            st["checked"] += len(micro)
            st["popped"] += int((~keep).sum())
            st["popped_signed"] += int((~keep_signed).sum())
            st["log_rho_abs_sum"] += float(abs_mean.sum())
            st["entropy_sum"] += float((entropy * mask).sum())
            loss_mask = mask * keep[:, None].to(mask.dtype)
            kept = float(loss_mask.sum())
            if kept == 0:
                continue
            loss, lst = clipped_policy_loss(logp, old, adv, loss_mask, g.clip_low, g.clip_high, ref, g.kl_coef,
                                            normaliser=float(n_tokens))
            loss.backward()
            st["kept_tokens"] += kept
            st["loss_sum"] += float(loss.detach()) * n_tokens
            st["clip_sum"] += lst["clip_frac"] * kept
            st["kl_sum"] += lst["kl"] * kept
        if 0 < st["kept_tokens"] < n_tokens:
            scale = n_tokens / st["kept_tokens"]
            for p in self.model.parameters():
                if p.grad is not None:
                    p.grad.mul_(scale)
        return st

    def optimise(self, seqs: list[_TrainSeq]) -> dict:
        """`epochs` passes of minibatch updates over `seqs` (`minibatch_gradients`, then a clipped AdamW step)."""
        g = self.cfg.grpo
        stats = {"seqs_trained": len(seqs), "mirrorpop_checked": 0, "mirrorpop_popped": 0,
                 "mirrorpop_popped_signed_rule": 0, "updates": 0}
        sums: dict[str, float] = {"loss": 0.0, "clip_frac": 0.0, "kl": 0.0, "grad_norm": 0.0}
        entropy_sum = tokens = log_rho_sum = 0.0
        if not seqs:
            return {**stats, **{k: float("nan") for k in (*sums, "entropy", "log_rho_abs_mean",
                                                          "mirrorpop_keep_rate")}}
        self.model.train()
        order = list(range(len(seqs)))
        for _ in range(g.epochs):
            self.rng.shuffle(order)
            for start in range(0, len(order), g.minibatch_size):
                batch = [seqs[i] for i in order[start:start + g.minibatch_size]]
                self.optimizer.zero_grad(set_to_none=True)
                st = self.minibatch_gradients(batch)
                stats["mirrorpop_checked"] += st["checked"]
                stats["mirrorpop_popped"] += st["popped"]
                stats["mirrorpop_popped_signed_rule"] += st["popped_signed"]
                log_rho_sum += st["log_rho_abs_sum"]
                entropy_sum += st["entropy_sum"]
                tokens += st["tokens"]
                if st["kept_tokens"] == 0:
                    continue
                grad_norm = torch.nn.utils.clip_grad_norm_(
                    [p for p in self.model.parameters() if p.requires_grad], g.grad_clip)
                self.optimizer.step()
                stats["updates"] += 1
                sums["loss"] += st["loss_sum"] / st["kept_tokens"]
                sums["clip_frac"] += st["clip_sum"] / st["kept_tokens"]
                sums["kl"] += st["kl_sum"] / st["kept_tokens"]
                sums["grad_norm"] += float(grad_norm)
        self.optimizer.zero_grad(set_to_none=True)
        out = {k: v / stats["updates"] if stats["updates"] else float("nan") for k, v in sums.items()}
        out["entropy"] = entropy_sum / max(tokens, 1.0)
        out["log_rho_abs_mean"] = log_rho_sum / max(stats["mirrorpop_checked"], 1)
        checked = stats["mirrorpop_checked"]
        out["mirrorpop_keep_rate"] = 1.0 - stats["mirrorpop_popped"] / checked if checked else float("nan")
        return {**stats, **out}

    def step(self) -> dict:
        cfg = self.cfg
        multi_turn = self.step_idx >= cfg.multi_turn.single_turn_steps
        from musacoder.judge.task_cache import shared_cache

        shared_cache().rotate()  # each step's groups share their tasks' reference work under secrets of this step
        device = next(self.model.parameters()).device
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        self._logits_chunk_bytes = 0
        t0 = time.perf_counter()
        slots, samples = self.rollout(multi_turn)
        t1 = time.perf_counter()
        rewards = torch.tensor([s.reward.reward for s in samples]).view(len(slots), cfg.grpo.group_size)
        advantages = grpo_advantages(rewards, cfg.grpo.adv_eps)
        # a verifier fault (infra_error) says nothing about the response: its group is left out of the loss and out of
        # the retry buffer rather than teaching the policy from a score of -1 it did not earn
        infra = torch.tensor([any(st == "infra_error" for st in s.reward.statuses) for s in samples])
        infra = infra.view(len(slots), cfg.grpo.group_size).any(dim=1)
        signal = group_has_signal(rewards) & ~infra
        retry_stats = self._update_retry_buffer(slots, samples, signal, infra)
        train_stats = self.optimise(self._train_sequences(samples, advantages, signal, multi_turn))
        if hasattr(self.generator, "sync"):
            self.generator.sync(self.model)
        t2 = time.perf_counter()
        n = len(samples)
        metrics = {
            "stage": "multi_turn" if multi_turn else "single_turn",
            "reward_mean": float(rewards.mean()),
            "score_first_mean": sum(s.reward.scores[0] for s in samples) / n,
            "score_best_mean": sum(max(s.reward.scores) for s in samples) / n,
            "pass_first": sum(s.reward.passed[0] for s in samples) / n,
            "pass_any": sum(any(s.reward.passed) for s in samples) / n,
            "turns_mean": sum(s.reward.num_turns for s in samples) / n,
            "response_tokens_mean": sum(len(s.turns[0].response_ids) for s in samples) / n,
            "infra_errors": sum(st == "infra_error" for s in samples for st in s.reward.statuses),
            "groups": len(slots),
            "groups_dropped": int((~signal).sum()),
            "groups_infra_dropped": int(infra.sum()),
            **retry_stats,
            **train_stats,
            "learning_rate": self.optimizer.param_groups[0]["lr"],
            "time_rollout_s": t1 - t0,
            "time_train_s": t2 - t1,
            **memory_metrics(device, self._logits_chunk_bytes),
        }
        self.step_idx += 1
        return metrics

    def evaluate(self) -> dict:
        """First-turn answers to the held-out tasks (`run.eval_samples` each; greedy at `run.eval_temperature` = 0,
        else sampled at that temperature with `rollout.top_p`), verified like rollouts. Returns `eval/pass_at_1`
        (share of answers that pass), `eval/speedup_mean` and `eval/speedup_geomean` (arithmetic and geometric mean
        speedup of the passing answers MooreEval timed; None when none), `eval/score_mean`, `eval/samples`,
        `eval/infra_errors` and `eval/time_s` (formulas in the module docstring)."""
        r = self.cfg.run
        t0 = time.perf_counter()
        envs = []
        for task in self.eval_tasks:
            for _ in range(r.eval_samples):
                env = self.env_factory(1)
                env.reset(task)
                envs.append(env)
        generator = HFGenerator(self.model, self.tokenizer, r.eval_temperature, self.cfg.rollout.top_p,
                                self.cfg.rollout.max_new_tokens)
        outcomes = [turns[0].outcome for turns in run_episodes(generator, self.tokenizer, envs,
                                                               self.cfg.rollout.chunk_size)]
        speedups = [o.speedup for o in outcomes if o.passed and o.speedup is not None]
        n = len(outcomes)
        return {
            "eval/pass_at_1": sum(o.passed for o in outcomes) / n,
            "eval/speedup_mean": sum(speedups) / len(speedups) if speedups else None,
            "eval/speedup_geomean": geomean(speedups),
            "eval/score_mean": sum(o.score for o in outcomes) / n,
            "eval/samples": n,
            "eval/infra_errors": sum(o.status == "infra_error" for o in outcomes),
            "eval/time_s": time.perf_counter() - t0,
        }

    def _eval_due(self) -> bool:
        every = self.cfg.run.eval_every
        return bool(every) and (self.step_idx % every == 0 or self.step_idx == self.cfg.run.steps)

    def train(self) -> list[dict]:
        """Run until `run.steps`; returns this call's metrics rows (also appended to metrics.jsonl). With
        `run.eval_every`, a fresh run first logs an evaluation as step 0, and every evaluation after a step is
        merged into that step's row."""
        r = self.cfg.run
        logger = MetricsLogger(self.out_dir, r.tensorboard, r.wandb, r.wandb_project, r.wandb_mode,
                               config=config_record(self.cfg))
        rows = []
        try:
            if r.eval_every and self.step_idx == 0:
                row = self.evaluate()
                logger.log(0, row)
                rows.append({"step": 0, **row})
            while self.step_idx < r.steps:
                metrics = self.step()
                if self._eval_due():
                    metrics.update(self.evaluate())
                logger.log(self.step_idx, metrics)
                rows.append({"step": self.step_idx, **metrics})
                if (r.save_every and self.step_idx % r.save_every == 0) or self.step_idx == r.steps:
                    self.save_checkpoint()
        finally:
            logger.close()
        return rows

    def save_final(self) -> Path:
        """final/ (and adapter/ for LoRA) via `rundir.save_final`, and the manifest naming them; a peft policy is
        merged in place, so call this once training is over."""
        files = rundir.save_final(self.model, self.tokenizer, self.out_dir)
        if hasattr(self.model, "merge_and_unload"):
            self.model = self.model.get_base_model()  # merged by save_final
        rundir.write_rl_manifest(self.out_dir, self.model_input, files, self._manifest_info())
        return self.out_dir / files["model"]

    def _manifest_info(self) -> dict:
        c = self.cfg
        return {"steps": self.step_idx, "steps_planned": c.run.steps,
                "env": c.env.kind, "tasks": len(self.tasks),
                "eval_tasks": len(self.eval_tasks) if c.run.eval_every else 0,
                "lora": c.model.lora is not None, "lr": c.grpo.lr, "kl_coef": c.grpo.kl_coef,
                "single_turn_steps": c.multi_turn.single_turn_steps,
                "tokenizer": c.model.tokenizer or ("char" if not c.model.name_or_path else "the model's")}

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    # --- checkpoints ---
    def _trainable_state(self) -> dict:
        trainable = {n for n, p in self.model.named_parameters() if p.requires_grad}
        state = self.model.state_dict()
        if len(trainable) == sum(1 for _ in self.model.parameters()):
            return state
        return {k: v for k, v in state.items() if k in trainable}

    def save_checkpoint(self) -> Path:
        ckpt_dir = self.out_dir / "checkpoints"
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        path = ckpt_dir / f"step_{self.step_idx:06d}.pt"
        tmp = path.with_suffix(".tmp")
        torch.save({
            "step": self.step_idx, "model": self._trainable_state(), "optimizer": self.optimizer.state_dict(),
            "retry": self.buffer.state_dict(), "rng": self.rng.getstate(), "torch_rng": torch.get_rng_state(),
            "task_queue": list(self._queue),
        }, tmp)
        tmp.replace(path)
        for old in sorted(ckpt_dir.glob("step_*.pt"))[: -self.cfg.run.keep_checkpoints]:
            old.unlink()
        return path

    def load_checkpoint(self, path: str | Path) -> None:
        """Continue from a checkpoint of this run: trained weights, optimiser (with the configured lr and weight
        decay, which a forced resume may have changed), retry buffer, RNG states, task order, step."""
        # our own file; it holds the retry buffer's tasks, so it is not weights-only
        state = torch.load(path, map_location="cpu", weights_only=False)
        missing = set(state["model"]) - set(self.model.state_dict())
        if missing:
            raise rundir.ResumeError(f"{path} does not fit this model (it holds {len(missing)} tensors the model "
                                     f"lacks, e.g. {sorted(missing)[0]}); start fresh with --fresh or another "
                                     "--out-dir")
        try:
            self.model.load_state_dict(state["model"], strict=False)
        except RuntimeError as e:
            raise rundir.ResumeError(f"{path} does not fit this model ({str(e).splitlines()[0]} …); start fresh "
                                     "with --fresh or another --out-dir") from e
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:
            group["lr"], group["weight_decay"] = self.cfg.grpo.lr, self.cfg.grpo.weight_decay
        self.buffer.load_state_dict(state["retry"])
        self.rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        self._queue = list(state["task_queue"])
        self.step_idx = int(state["step"])
        if hasattr(self.generator, "sync"):
            self.generator.sync(self.model)


def train_from_config(cfg: RLConfig, **inject) -> list[dict]:
    """Build a Trainer from `cfg`, run it to the end, save the final model; returns the metrics rows."""
    trainer = Trainer(cfg, **inject)
    try:
        rows = trainer.train()
        trainer.save_final()
        return rows
    finally:
        trainer.close()
