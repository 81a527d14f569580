"""Train with verl 0.9 against MooreEval served by `musacoder serve` (docs/verl.md).

Three pieces, each named in a verl config:

- `compute_score` — the custom reward function (`reward.custom_reward_function.path/name`): async, verifies the
  decoded response through the service and returns `{"score": reward, ...metrics}`.
- `MooreEvalAgentLoop` — a multi-turn agent loop (`agent_name: mooreeval_agent`): up to `max_turns` responses,
  each verified, with MooreEval's feedback as the next user turn. Feedback tokens have response_mask 0. Under
  PrimeEcho (`loss_turns="first"`, default) only the first response has mask 1 and the episode's reward is
  R = α·s₁ + (1−α)·max_k s_k + b_early (`musacoder.rl.primeecho`); later turns are generated from a context with
  earlier thinking stripped. `single_turn_steps` gives the paper's schedule: one response per episode, scored s₁,
  for verl's first training steps, then multi-turn. Buffered Dynamic Retry replays groups that failed as repair
  prompts (never into validation rows, `extra_info.split = "val"`).
- `mirrorpop_policy_loss` — MirrorPop as a verl policy loss, registered as `mirrorpop` through verl's
  `register_policy_loss` (`actor.policy_loss.loss_mode: mirrorpop`): in every micro-batch update, sequences whose
  mean_t |log π_θ − log π_old| exceeds δ leave verl's PPO-clip loss (π_old: the rollout's log-probs under verl's
  `bypass_mode`, as in the example config). verl's own `rollout_rs` options cannot express
  this rule (`seq_mean_k1` bounds the signed mean, the rule MirrorPop replaces; the others bound squares, k3 or
  maxima; docs/verl.md).

Dataset rows: `prompt` (chat messages), `reward_model.ground_truth` = a KernelBench id under the service's task root
(`level1/19_ReLU`) or the problem file's text, and optionally `extra_info.backend`, `extra_info.set` (size
overrides), `extra_info.task_name`, `extra_info.split` ("val" for validation rows).

verl is optional (`pip install 'musacoder[verl]'`); `compute_score` and the pure parts work without it.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import threading
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from musacoder.records import Task, Verdict
from musacoder.rl.primeecho import primeecho_reward
from musacoder.rl.retry import RetryBuffer, RetryEntry, repair_prompt

# ---- the service ---------------------------------------------------------------------------------------------------
_CLIENTS: dict[tuple[str, str | None], Any] = {}
_CLIENTS_LOCK = threading.Lock()
_POOL = ThreadPoolExecutor(max_workers=64, thread_name_prefix="musacoder-verl-verify")  # verl keeps 32-64 in flight


def remote_verifier(url: str | None = None, token: str | None = None, timeout_s: float = 3600.0):
    """One shared `RemoteVerifier` per (url, token) in this process. `url` defaults to $MUSACODER_SERVICE_URL."""
    url = url or os.environ.get("MUSACODER_SERVICE_URL")
    if not url:
        raise ValueError("no MooreEval service: pass service_url in reward_kwargs (or the agent loop config), or "
                         "set MUSACODER_SERVICE_URL to a `musacoder serve` endpoint")
    key = (url, token)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            from musacoder.client import RemoteVerifier

            _CLIENTS[key] = RemoteVerifier(url, token, timeout_s=timeout_s)
        return _CLIENTS[key]


def task_of(ground_truth: Any, extra_info: dict | None) -> Task | str:
    """The task a row names: its `ground_truth` is a KernelBench id (sent as is, resolved by the service) or the
    problem file's text (sent inline, named by `extra_info.task_name`)."""
    text = str(ground_truth)
    if "\n" in text or "class Model" in text:
        from musacoder.tasks import task_from_source

        name = (extra_info or {}).get("task_name") or "inline"
        return task_from_source(text, name.rsplit("/", 1)[-1])
    return text


async def verify_remote(solution: str, ground_truth: Any, extra_info: dict | None, *, service_url: str | None = None,
                        token: str | None = None, timeout_s: float = 3600.0) -> Verdict:
    """Verify one response through the service without blocking the event loop; a request the service refuses or
    cannot answer becomes an `infra_error` verdict (it says nothing about the response)."""
    info = dict(extra_info or {})
    try:
        client = remote_verifier(service_url, token, timeout_s)
        task = task_of(ground_truth, info)
        overrides = dict(info.get("set") or {}) or None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            _POOL, lambda: client.verify(task, solution, backend=info.get("backend"), overrides=overrides))
    except Exception as e:  # noqa: BLE001 - the trainer must go on; the verdict says what failed
        return Verdict(status="infra_error", error=f"{type(e).__name__}: {e}",
                       feedback=f"The verification service could not judge this response: {e}")


METRIC_KEYS = ("acc", "pass_fraction", "speedup", "compiled", "legal", "infra_error")


def verdict_metrics(verdict: Verdict) -> dict[str, float]:
    """The verdict as numbers for verl's reward_extra_info (the same keys for every row, as verl requires)."""
    return {"acc": float(bool(verdict.correct and verdict.legal)), "pass_fraction": float(verdict.pass_fraction or 0.0),
            "speedup": float(verdict.speedup or 0.0), "compiled": float(bool(verdict.compiled)),
            "legal": float(bool(verdict.legal)), "infra_error": float(verdict.status == "infra_error")}


def score_of(verdict: Verdict, infra_score: float = 0.0) -> float:
    """MooreEval's reward; `infra_score` for a verdict without one (the service failed, not the response)."""
    return infra_score if verdict.reward is None else float(verdict.reward)


async def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None,
                        *, service_url: str | None = None, token: str | None = None, timeout_s: float = 3600.0,
                        infra_score: float = 0.0, **kwargs) -> dict[str, float]:
    """verl custom reward function: `{"score": s, "acc", "pass_fraction", "speedup", "compiled", "legal",
    "infra_error"}` for one response. `service_url`, `token`, `timeout_s`, `infra_score` come from
    `reward.custom_reward_function.reward_kwargs` (url and token default to $MUSACODER_SERVICE_URL and
    $MUSACODER_SERVICE_TOKEN). s is MooreEval's reward: −1 fail, −0.5 + 0.5·q partial, 1 + λ·min(max(ν−1, 0), ν_max)
    pass; a verdict without reward (infra_error) scores `infra_score` and sets `infra_error` = 1."""
    verdict = await verify_remote(solution_str, ground_truth, extra_info, service_url=service_url, token=token,
                                  timeout_s=timeout_s)
    return {"score": score_of(verdict, infra_score), **verdict_metrics(verdict)}


# ---- MirrorPop as a verl policy loss -------------------------------------------------------------------------------
MIRRORPOP_LOSS = "mirrorpop"


def mirrorpop_delta(actor_config) -> float:
    """δ for the `mirrorpop` loss: `actor.policy_loss.rollout_correction.rollout_rs_threshold` (verl's field for a
    rejection threshold; verl itself reads `policy_loss.rollout_correction` only under its own `bypass_mode` loss)."""
    corr = actor_config.policy_loss.get("rollout_correction", None) or {}
    delta = corr.get("rollout_rs_threshold", None)
    if delta is None:
        raise ValueError("policy_loss.loss_mode 'mirrorpop' needs δ: set "
                         "actor_rollout_ref.actor.policy_loss.rollout_correction.rollout_rs_threshold (e.g. 0.1)")
    return float(delta)


def mirrorpop_policy_loss(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode: str = "token-mean",
                          config=None, rollout_is_weights=None):
    """verl policy loss `mirrorpop` (`actor.policy_loss.loss_mode: mirrorpop`): verl's PPO-clip loss
    (`compute_policy_loss_vanilla`) over the sequences MirrorPop keeps.

    With log ρ_{i,t} = log π_θ − log π_old over the response tokens of sequence i, sequence i stays in the loss iff
    mean_t |log ρ_{i,t}| ≤ δ (`musacoder.rl.mirrorpop.mirrorpop_keep`). π_θ is the policy being updated in this
    micro-batch; π_old is verl's `old_log_probs`: the rollout engine's log-probs of the sampled tokens under
    `algorithm.rollout_correction.bypass_mode: true` with verl's v1 trainer (the example config; the embedded
    trainer's comparison), or the trainer's recomputation with the weights that sampled the batch otherwise.
    Popped sequences get a zero mask; verl's token-mean still divides by the mini-batch's token count, as for verl's
    own rejection. Metrics: `actor/mirrorpop_popped` (share of sequences popped), `actor/mirrorpop_popped_signed_rule`
    (what the signed-mean rule would pop), `actor/log_rho_abs_mean`."""
    import torch
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla

    from musacoder.rl.mirrorpop import mirrorpop_keep, sequence_log_ratio_stats

    delta = mirrorpop_delta(config)
    with torch.no_grad():
        current = log_prob.detach()
        keep = mirrorpop_keep(current, old_log_prob, response_mask, delta)
        keep_signed = mirrorpop_keep(current, old_log_prob, response_mask, delta, mode="signed")
        abs_mean, _ = sequence_log_ratio_stats(current, old_log_prob, response_mask)
        valid = response_mask.sum(dim=-1) > 0
        n_valid = max(int(valid.sum()), 1)
    mask = response_mask * keep.unsqueeze(-1).to(response_mask.dtype)
    loss, metrics = compute_policy_loss_vanilla(old_log_prob=old_log_prob, log_prob=log_prob, advantages=advantages,
                                                response_mask=mask, loss_agg_mode=loss_agg_mode, config=config,
                                                rollout_is_weights=rollout_is_weights)
    metrics.update({"actor/mirrorpop_popped": float(((~keep) & valid).sum()) / n_valid,
                    "actor/mirrorpop_popped_signed_rule": float(((~keep_signed) & valid).sum()) / n_valid,
                    "actor/log_rho_abs_mean": float(abs_mean[valid].mean()) if bool(valid.any()) else 0.0})
    return loss, metrics


def register_mirrorpop() -> bool:
    """Register `mirrorpop_policy_loss` in verl's policy-loss registry (`register_policy_loss`); False without verl.
    Importing this module does it, so naming the module in `actor_rollout_ref.model.external_lib` registers the loss
    in every verl process that builds the model config, the actor workers included."""
    try:
        from verl.trainer.ppo.core_algos import register_policy_loss
    except ImportError:
        return False
    register_policy_loss(MIRRORPOP_LOSS)(mirrorpop_policy_loss)
    return True


register_mirrorpop()


# ---- Buffered Dynamic Retry across the samples of a group ---------------------------------------------------------
@dataclass
class _Group:
    seen: int = 0
    passed: bool = False
    best: tuple[float, str, str] | None = None  # (score, response, feedback) of the best failed response
    replay: RetryEntry | None = None  # the repair task every member of this group runs
    decided: bool = False


@dataclass
class GroupRetry:
    """Buffered Dynamic Retry for an agent loop that sees one sample at a time.

    Samples of one group share a key (the prompt, and verl's `uid` when present). The first sample of a group to
    start decides, once for the whole group, whether it becomes a replay of a buffered failure (probability
    `replay_prob`, `RetryBuffer.draw`); its mates get the same repair task. When all `group_size` samples of a
    group have finished and none passed, the group's best failed response and its feedback are pushed to the
    buffer. A replayed group that fails again is pushed back until `max_replays`. State is per process: a group
    split across verl's agent-loop workers is never pushed (missed, not wrong)."""

    group_size: int
    capacity: int = 256
    replay_prob: float = 0.1
    max_replays: int = 1
    seed: int = 0
    buffer: RetryBuffer = field(init=False)
    groups: OrderedDict = field(default_factory=OrderedDict)

    def __post_init__(self):
        self.buffer = RetryBuffer(self.capacity, self.replay_prob)
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def start(self, key: str) -> RetryEntry | None:
        """The repair task this sample's group runs instead of its own prompt, or None."""
        with self._lock:
            g = self.groups.setdefault(key, _Group())
            if not g.decided:
                g.decided = True
                drawn = self.buffer.draw(1, self._rng)
                g.replay = drawn[0] if drawn else None
            while len(self.groups) > 4 * self.capacity + 1024:  # groups abandoned mid-way are forgotten
                self.groups.popitem(last=False)
            return g.replay

    def finish(self, key: str, task: Any, prompt: str, score: float, passed: bool, response: str,
               feedback: str) -> bool:
        """Record one finished sample; True when this completed a failed group that went into the buffer."""
        with self._lock:
            g = self.groups.setdefault(key, _Group(decided=True))
            g.seen += 1
            g.passed |= passed
            if not passed and (g.best is None or score > g.best[0]):
                g.best = (score, response, feedback)
            if g.seen < self.group_size:
                return False
            del self.groups[key]
            if g.passed or g.best is None:
                return False
            replays = g.replay.replays + 1 if g.replay is not None else 0
            if replays > self.max_replays:
                return False
            base = g.replay if g.replay is not None else None
            self.buffer.push(RetryEntry(task=base.task if base else task, prompt=base.prompt if base else prompt,
                                        failed_response=g.best[1], feedback=g.best[2], score=g.best[0],
                                        replays=replays))
            return True


def group_key(messages: list[dict], uid: Any = None) -> str:
    text = "\x1e".join(f"{m.get('role')}\x1f{m.get('content')}" for m in messages)
    return hashlib.sha256(f"{uid}\x1d{text}".encode()).hexdigest()


# ---- the agent loop -----------------------------------------------------------------------------------------------
@dataclass
class TurnResult:
    """One model response of an episode and MooreEval's verdict on it."""

    score: float
    passed: bool
    status: str
    feedback: str
    response: str = ""  # the decoded response this verdict judged


def episode_reward(turns: list[TurnResult], primeecho: bool, alpha: float, bonus: tuple[float, ...],
                   infra_score: float, multi_turn: bool = True) -> float:
    """The episode's reward: in the single-turn warm-up (`multi_turn` False) the first turn's score s₁, as in the
    embedded trainer's stage A; else PrimeEcho's R over the judged turns (or the last judged turn's score without
    it). `infra_score` when the first turn could not be judged."""
    judged = [t for t in turns if t.status != "infra_error"]
    if not judged or turns[0].status == "infra_error":
        return infra_score
    if not multi_turn:
        return judged[0].score
    if not primeecho:
        return judged[-1].score
    return primeecho_reward([t.score for t in judged], [t.passed for t in judged], alpha, bonus)


def retry_turn(turns: list[TurnResult]) -> TurnResult | None:
    """The turn an unsolved episode offers Buffered Dynamic Retry: its best-scoring judged response (the earliest on
    a tie), whose own text, feedback and score go into the buffer together; None when a turn passed or none was
    judged."""
    if any(t.passed for t in turns):
        return None
    judged = [t for t in turns if t.status != "infra_error"]
    return max(judged, key=lambda t: t.score) if judged else None


def is_validation_row(extra_info: dict | None) -> bool:
    """A validation row (`extra_info.split == "val"`, written by examples/verl/make_dataset.py --split val). verl
    0.9.1 does not tell an agent loop whether it runs a validation batch (the flag stays in the worker's
    trajectory info), so the rows say it."""
    return str((extra_info or {}).get("split", "")).lower() in ("val", "validation", "test")


def in_warmup(single_turn_steps: int, global_step: Any) -> bool:
    """Whether verl's training step `global_step` (1-based; the validation before training runs at 0) is in the
    single-turn warm-up (stage A: steps ≤ `single_turn_steps`); after it, episodes are multi-turn (stage B)."""
    if single_turn_steps <= 0:
        return False
    if global_step is None:
        raise ValueError("single_turn_steps needs the training step of each sample: verl's v1 trainer "
                         "(trainer.use_v1=true, the default in 0.9) passes it as `global_steps`; this sample has none")
    return int(global_step) <= single_turn_steps


try:  # verl 0.9
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
except ImportError:  # pragma: no cover - verl is optional
    AgentLoopBase = None

_RETRY: dict[tuple, GroupRetry] = {}

if AgentLoopBase is not None:

    @register("mooreeval_agent")
    class MooreEvalAgentLoop(AgentLoopBase):
        """Kernel refinement with MooreEval feedback turns (module docstring). Options come from the agent loop
        config entry (`agent_loop_config_path`), e.g. `service_url`, `max_turns`, `loss_turns`,
        `single_turn_steps` (verl training steps of single-turn warm-up, 0 = none); defaults follow the paper
        (3 turns, α = 0.75, loss on the first turn)."""

        def __init__(self, *args, service_url: str | None = None, token: str | None = None, max_turns: int = 3,
                     loss_turns: str = "first", primeecho: bool = True, alpha: float = 0.75,
                     bonus: tuple[float, ...] = (0.2, 0.1), infra_score: float = 0.0, retry: bool = True,
                     retry_capacity: int = 256, retry_prob: float = 0.1, retry_max_replays: int = 1,
                     single_turn_steps: int = 0, timeout_s: float = 3600.0, **kwargs):
            super().__init__(*args, **kwargs)
            if loss_turns not in ("first", "all"):
                raise ValueError(f"loss_turns must be 'first' (PrimeEcho) or 'all', got {loss_turns!r}")
            self.service_url, self.token, self.timeout_s = service_url, token, timeout_s
            self.max_turns, self.loss_turns = int(max_turns), loss_turns
            self.single_turn_steps = int(single_turn_steps)
            self.primeecho, self.alpha, self.bonus = bool(primeecho), float(alpha), tuple(float(b) for b in bonus)
            self.infra_score = float(infra_score)
            self.response_length = self.rollout_config.response_length
            self.retry = None
            if retry:
                n = int(self.rollout_config.get("n", 1) or 1)
                key = (n, int(retry_capacity), float(retry_prob), int(retry_max_replays))
                self.retry = _RETRY.setdefault(key, GroupRetry(n, int(retry_capacity), float(retry_prob),
                                                               int(retry_max_replays)))

        async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
            from musacoder.candidates import strip_think
            from musacoder.prompts import feedback_message

            messages = [dict(m) for m in kwargs["raw_prompt"]]
            extra_info = dict(kwargs.get("extra_info") or {})
            ground_truth = (kwargs.get("reward_model") or {}).get("ground_truth", extra_info.get("task"))
            key = group_key(messages, kwargs.get("uid"))
            multi_turn = not in_warmup(self.single_turn_steps, kwargs.get("global_steps"))
            max_turns = self.max_turns if multi_turn else 1
            # validation rows are measured as they are: never replaced by a repair task, never buffered
            retry = None if is_validation_row(extra_info) else self.retry
            replay = retry.start(key) if retry is not None else None
            if replay is not None:  # this group repairs a buffered failure instead of its own prompt
                ground_truth, extra_info = replay.task
                messages[-1]["content"] = repair_prompt(replay)
            first_prompt = messages[-1]["content"]
            request_id = uuid.uuid4().hex  # one per episode: the server keeps its turns together (prefix cache)

            prompt_ids = await self.ct_build_initial_tokens(messages)
            runtime_ids = list(prompt_ids)  # the trajectory: prompt, responses and feedback
            mask: list[int] = []
            logprobs: list[float] | None = []
            traj_messages = list(messages)  # what the trajectory's tokens render
            ctx_messages = list(messages)  # what the next turn is generated from (thinking stripped under "first")
            turns: list[TurnResult] = []
            last_text = ""
            metrics: dict[str, Any] = {}
            for k in range(1, max_turns + 1):
                gen_ids = runtime_ids if (k == 1 or self.loss_turns == "all") else \
                    await self.ct_build_initial_tokens(ctx_messages)
                out = await self.server_manager.generate(request_id=request_id, prompt_ids=gen_ids,
                                                         sampling_params=sampling_params)
                lp = out.log_probs if out.log_probs else None
                start = len(mask)
                merged, mask, logprobs = await self.ct_merge_assistant_token(
                    runtime_ids, out.token_ids, mask, logprobs if lp is not None else None, assistant_logprobs=lp)
                runtime_ids = merged.token_ids
                if k > 1 and self.loss_turns == "first":  # PrimeEcho: the loss sees the first response only
                    mask = mask[:start] + [0] * (len(mask) - start)
                last_text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
                verdict = await verify_remote(last_text, ground_truth, extra_info, service_url=self.service_url,
                                              token=self.token, timeout_s=self.timeout_s)
                passed = bool(verdict.correct and verdict.legal)
                turns.append(TurnResult(score_of(verdict, self.infra_score), passed, verdict.status,
                                        verdict.feedback or f"status: {verdict.status}", last_text))
                if k == 1:
                    metrics = verdict_metrics(verdict)
                if passed or verdict.status == "infra_error" or k == max_turns or \
                        len(mask) >= self.response_length:
                    break
                feedback = feedback_message(k, turns[-1].feedback, passed)
                before = traj_messages + [{"role": "assistant", "content": last_text}]
                after = before + [{"role": "user", "content": feedback}]
                merged, mask, logprobs = await self.ct_merge_context_msg(before, after, runtime_ids, mask, logprobs)
                runtime_ids, traj_messages = merged.token_ids, after  # feedback tokens: mask 0
                ctx_messages = ctx_messages + [{"role": "assistant", "content": strip_think(last_text).strip()},
                                               {"role": "user", "content": feedback}]

            reward = episode_reward(turns, self.primeecho, self.alpha, self.bonus, self.infra_score, multi_turn)
            if retry is not None and turns[0].status != "infra_error":
                chosen = retry_turn(turns)  # text, feedback and score of one and the same turn
                if chosen is None:  # a turn passed
                    retry.finish(key, (ground_truth, extra_info), first_prompt, 0.0, True, "", "")
                else:
                    retry.finish(key, (ground_truth, extra_info), first_prompt, chosen.score, False,
                                 chosen.response, chosen.feedback)
            n_resp = len(mask)
            response_ids = runtime_ids[len(runtime_ids) - n_resp:] if n_resp else []
            prompt_ids = runtime_ids[: len(runtime_ids) - n_resp]
            first_pass = next((i + 1 for i, t in enumerate(turns) if t.passed), 0)
            info = {**metrics, "first_score": turns[0].score, "best_score": max(t.score for t in turns),
                    "turns": float(len(turns)), "pass_turn": float(first_pass), "replay": float(replay is not None),
                    "multi_turn": float(multi_turn),
                    "infra_error": float(any(t.status == "infra_error" for t in turns))}
            output = AgentLoopOutput(
                prompt_ids=prompt_ids,
                response_ids=response_ids[: self.response_length],
                response_mask=mask[: self.response_length],
                response_logprobs=logprobs[: self.response_length] if logprobs else None,
                reward_score=reward,
                num_turns=2 * len(turns),
                metrics={},
            )
            output.extra_fields.update({"turn_scores": [t.score for t in turns], "tool_rewards": [],
                                        "reward_extra_info": info})
            return output
else:  # pragma: no cover
    MooreEvalAgentLoop = None
