"""The embedded GRPO trainer: one process, one machine, torch + transformers.

One step, top to bottom:
  1. build the batch: `prompts_per_step` slots, each a fresh task or (with probability `retry.replay_prob`) the
     oldest Buffered Dynamic Retry entry turned into a repair prompt; each slot is a group of `group_size` episodes;
  2. roll out: single-turn in stage A (`step < multi_turn.single_turn_steps`), up to `max_turns` turns in stage B,
     verifications running on a thread pool while generation continues;
  3. reward: the score (stage A) or PrimeEcho (stage B); group-normalised advantages; groups without signal are
     dropped; groups where every episode failed go into the retry buffer;
  4. optimise for `epochs` passes over the batch (first-turn responses only, by default), popping sequences whose
     training policy drifted from the rollout policy (MirrorPop);
  5. log metrics, checkpoint.
"""

from __future__ import annotations

import glob
import math
import random
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from musacoder.rl.config import RLConfig
from musacoder.rl.env import KernelEnv, make_verifier_pool, verifier_from_config
from musacoder.rl.grpo import clipped_policy_loss, group_has_signal, grpo_advantages
from musacoder.rl.metrics import MetricsLogger
from musacoder.rl.mirrorpop import mirrorpop_keep, sequence_log_ratio_stats
from musacoder.rl.primeecho import primeecho_reward
from musacoder.rl.records import RewardRecord, Sample, Turn, assemble_sample
from musacoder.rl.retry import RetryBuffer, RetryEntry
from musacoder.rl.rollout import HFGenerator, run_episodes
from musacoder.rl.tokenizer import CharTokenizer
from musacoder.rl.toy import TOY_CHARSET, ToyEnv, toy_tasks

# --- building blocks (the edges: models, tokenizers, task files) -----------------------------------------------------


def build_tokenizer(cfg: RLConfig):
    name = cfg.model.tokenizer or cfg.model.name_or_path or "char"
    if name == "char":
        default = TOY_CHARSET if cfg.env.kind == "toy" else string.printable
        return CharTokenizer(cfg.env.charset or default)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
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
        model = transformers.AutoModelForCausalLM.from_pretrained(m.name_or_path, dtype=dtype)
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


def response_log_probs(model, contexts, responses, temperature: float, pad_id: int):
    """log π(response token | context, earlier response tokens) at softmax(logits / T), and the entropy there.

    Rows are right-padded; returns (log_probs [B, T], entropy [B, T]) with T the longest response; padding is 0."""
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
    logits = model(input_ids=ids.to(device), attention_mask=attention.to(device)).logits
    # the token at position p is predicted by the logits at p − 1
    pos = torch.tensor([len(c) - 1 for c in contexts])[:, None] + torch.arange(t_max)[None, :]
    pos = pos.clamp(max=width - 1).to(device)
    picked = logits.gather(1, pos.unsqueeze(-1).expand(-1, -1, logits.shape[-1])).float() / temperature
    logp = torch.log_softmax(picked, dim=-1)
    token_logp = logp.gather(-1, targets.to(device).unsqueeze(-1)).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return token_logp, entropy


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

    `model`, `tokenizer`, `tasks`, `verifier` and `env_factory(max_turns) -> env` can be injected (tests); by default
    they come from the config.
    """

    def __init__(self, config: RLConfig, *, model=None, tokenizer=None, tasks=None, verifier=None, env_factory=None):
        self.cfg = cfg = config
        if cfg.run.threads:
            torch.set_num_threads(cfg.run.threads)
        self.rng = random.Random(cfg.run.seed)
        torch.manual_seed(cfg.run.seed)
        self.out_dir = Path(cfg.run.out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "config.json").write_text(cfg.model_dump_json(indent=2))
        self.tokenizer = tokenizer if tokenizer is not None else build_tokenizer(cfg)
        self.model = model if model is not None else build_policy(cfg, self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.ref_model = self._build_reference() if cfg.grpo.kl_coef > 0 else None
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=cfg.grpo.lr, weight_decay=cfg.grpo.weight_decay)
        if tasks is not None:
            self.tasks = list(tasks)
        elif cfg.env.kind == "toy":
            self.tasks = toy_tasks(cfg.env.toy_letters, cfg.env.toy_length)
        else:
            self.tasks = load_kernel_tasks(cfg.env.tasks, cfg.env.overrides)
        self.pool = make_verifier_pool(cfg.env.max_workers)
        self.env_factory = env_factory or self._default_env_factory(verifier)
        self.buffer = RetryBuffer(cfg.retry.capacity, cfg.retry.replay_prob)
        self.generator = self._build_generator()
        self.step_idx = 0
        self._queue: list[int] = []
        if cfg.run.resume:
            self.load_latest_checkpoint()

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
            max_turns=max_turns, executor=self.pool)

    def _build_generator(self):
        r = self.cfg.rollout
        if r.engine == "vllm":
            from musacoder.rl.rollout import VLLMGenerator

            if not self.cfg.model.name_or_path:
                raise ValueError("rollout.engine = 'vllm' needs model.name_or_path (vLLM loads the model itself)")
            gen = VLLMGenerator(self.cfg.model.name_or_path, self.tokenizer, r.temperature, r.top_p,
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
                lp, _ = response_log_probs(self.ref_model, ctx, resp, self.cfg.rollout.temperature, self.pad_id)
            else:
                with self.model.disable_adapter():
                    lp, _ = response_log_probs(self.model, ctx, resp, self.cfg.rollout.temperature, self.pad_id)
        return lp

    def optimise(self, seqs: list[_TrainSeq]) -> dict:
        """`epochs` passes of minibatch updates over `seqs`, with MirrorPop applied in every minibatch."""
        g, mp = self.cfg.grpo, self.cfg.mirrorpop
        stats = {"seqs_trained": len(seqs), "mirrorpop_checked": 0, "mirrorpop_popped": 0,
                 "mirrorpop_popped_signed_rule": 0, "updates": 0}
        sums: dict[str, float] = {"loss": 0.0, "clip_frac": 0.0, "kl": 0.0, "grad_norm": 0.0, "entropy": 0.0,
                                  "log_rho_abs_mean": 0.0}
        if not seqs:
            return {**stats, **{k: float("nan") for k in sums}}
        device = next(self.model.parameters()).device
        self.model.train()
        order = list(range(len(seqs)))
        for _ in range(g.epochs):
            self.rng.shuffle(order)
            for start in range(0, len(order), g.minibatch_size):
                idx = order[start:start + g.minibatch_size]
                batch = [seqs[i] for i in idx]
                ref = self._reference_log_probs(batch)
                logp, entropy = response_log_probs(self.model, [s.context_ids for s in batch],
                                                   [s.response_ids for s in batch], self.cfg.rollout.temperature,
                                                   self.pad_id)
                t_max = logp.shape[1]
                mask = torch.zeros_like(logp)
                old = torch.zeros_like(logp)
                for i, s in enumerate(batch):
                    mask[i, : len(s.response_ids)] = 1.0
                    old[i, : len(s.response_ids)] = torch.tensor(s.rollout_log_probs[:t_max], device=device)
                adv = torch.tensor([s.advantage for s in batch], device=device)
                abs_mean, _ = sequence_log_ratio_stats(logp.detach(), old, mask)
                keep_signed = mirrorpop_keep(logp.detach(), old, mask, mp.delta, mode="signed")
                keep = mirrorpop_keep(logp.detach(), old, mask, mp.delta, mode=mp.mode) if mp.enabled else \
                    torch.ones(len(batch), dtype=torch.bool, device=device)
                stats["mirrorpop_checked"] += len(batch)
                stats["mirrorpop_popped"] += int((~keep).sum())
                stats["mirrorpop_popped_signed_rule"] += int((~keep_signed).sum())
                sums["log_rho_abs_mean"] += float(abs_mean.mean())
                loss_mask = mask * keep[:, None].to(mask.dtype)
                if loss_mask.sum() == 0:
                    continue
                loss, st = clipped_policy_loss(logp, old, adv, loss_mask, g.clip_low, g.clip_high, ref, g.kl_coef)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(
                    [p for p in self.model.parameters() if p.requires_grad], g.grad_clip)
                self.optimizer.step()
                stats["updates"] += 1
                sums["loss"] += float(loss.detach())
                sums["clip_frac"] += st["clip_frac"]
                sums["kl"] += st["kl"]
                sums["grad_norm"] += float(grad_norm)
                sums["entropy"] += float((entropy.detach() * mask).sum() / mask.sum())
        n_minibatches = g.epochs * math.ceil(len(seqs) / g.minibatch_size)
        out = {k: v / max(stats["updates"], 1) for k, v in sums.items() if k != "log_rho_abs_mean"}
        out["log_rho_abs_mean"] = sums["log_rho_abs_mean"] / n_minibatches
        return {**stats, **out}

    def step(self) -> dict:
        cfg = self.cfg
        multi_turn = self.step_idx >= cfg.multi_turn.single_turn_steps
        from musacoder.judge.task_cache import shared_cache

        shared_cache().rotate()  # each step's groups share their tasks' reference work under secrets of this step
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
            "time_rollout_s": t1 - t0,
            "time_train_s": t2 - t1,
        }
        self.step_idx += 1
        return metrics

    def train(self) -> list[dict]:
        """Run until `run.steps`; returns this call's metrics rows (also appended to metrics.jsonl)."""
        logger = MetricsLogger(self.out_dir, self.cfg.run.tensorboard)
        rows = []
        try:
            while self.step_idx < self.cfg.run.steps:
                metrics = self.step()
                logger.log(self.step_idx, metrics)
                rows.append({"step": self.step_idx, **metrics})
                every = self.cfg.run.save_every
                if (every and self.step_idx % every == 0) or self.step_idx == self.cfg.run.steps:
                    self.save_checkpoint()
        finally:
            logger.close()
        return rows

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

    def load_latest_checkpoint(self) -> Path | None:
        ckpts = sorted((self.out_dir / "checkpoints").glob("step_*.pt"))
        if not ckpts:
            return None
        # our own file; it holds the retry buffer's tasks, so it is not weights-only
        state = torch.load(ckpts[-1], map_location="cpu", weights_only=False)
        self.model.load_state_dict(state["model"], strict=False)
        self.optimizer.load_state_dict(state["optimizer"])
        self.buffer.load_state_dict(state["retry"])
        self.rng.setstate(state["rng"])
        torch.set_rng_state(state["torch_rng"])
        self._queue = list(state["task_queue"])
        self.step_idx = int(state["step"])
        if hasattr(self.generator, "sync"):
            self.generator.sync(self.model)
        return ckpts[-1]


def train_from_config(cfg: RLConfig, **inject) -> list[dict]:
    """Build a Trainer from `cfg`, run it to the end, save the final model; returns the metrics rows."""
    trainer = Trainer(cfg, **inject)
    try:
        rows = trainer.train()
        if hasattr(trainer.model, "save_pretrained"):
            trainer.model.save_pretrained(trainer.out_dir / "final")
        return rows
    finally:
        trainer.close()
