"""verl 0.9 integration: the reward function and the agent loop against a live service (keyword fake verifier) and
a fake model server; MirrorPop inside verl's rejection step. Tests that need verl skip without it."""

import asyncio
from pathlib import Path
import pytest
import torch

from musacoder.integrations.verl import GroupRetry, compute_score, episode_reward, TurnResult
from musacoder.rl.mirrorpop import mirrorpop_keep
from musacoder.rl.primeecho import primeecho_reward

VERL_MISSING = ("verl is not installed: CI installs it beside .[dev] without its pins (see .ci/run): pip install "
                "--no-deps verl==0.9.1 hydra-core==1.3.8 omegaconf==2.3.0 antlr4-python3-runtime==4.9.3 "
                "tensordict==0.10.0 pyvers==0.1.0 orjson codetiming pylatexenc cachetools cloudpickle")


# ---- the reward function (no verl needed) --------------------------------------------------------------------------
def test_compute_score_calls_the_service(service):
    url, fake = service

    async def many():
        rows = [("```python\nPASS\n```", "level1/19_ReLU"), ("HALF", "level1/19_ReLU"), ("junk", "level1/20_Other")]
        return await asyncio.gather(*(compute_score("kernelbench", s, gt, {"backend": "cpu"}, service_url=url)
                                      for s, gt in rows))

    passed, half, junk = asyncio.run(many())
    assert passed == {"score": 1.5, "acc": 1.0, "pass_fraction": 1.0, "speedup": 2.0, "compiled": 1.0,
                      "legal": 1.0, "infra_error": 0.0}
    assert half["score"] == -0.25 and half["acc"] == 0.0 and half["pass_fraction"] == 0.5
    assert junk["score"] == -1.0 and junk["infra_error"] == 0.0
    assert sorted(t for t, _ in fake.seen) == ["level1/19_ReLU", "level1/19_ReLU", "level1/20_Other"]


def test_compute_score_with_the_task_inline_and_an_unknown_task(service):
    url, fake = service
    relu = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "relu.py"

    got = asyncio.run(compute_score("kernelbench", "PASS", relu.read_text(), {"task_name": "level1/19_ReLU"},
                                    service_url=url))
    assert got["score"] == 1.5 and fake.seen[-1][0] == "19_ReLU"
    # a task the service does not know: infra_error, scored infra_score (the response was never judged)
    bad = asyncio.run(compute_score("kernelbench", "PASS", "level1/99_Missing", {}, service_url=url, infra_score=0.0))
    assert bad == {"score": 0.0, "acc": 0.0, "pass_fraction": 0.0, "speedup": 0.0, "compiled": 0.0, "legal": 0.0,
                   "infra_error": 1.0}


def test_episode_reward_is_primeecho():
    turns = [TurnResult(-0.25, False, "incorrect", ""), TurnResult(1.5, True, "ok", "")]
    assert episode_reward(turns, True, 0.75, (0.2, 0.1), 0.0) == pytest.approx(0.75 * -0.25 + 0.25 * 1.5 + 0.1)
    assert episode_reward(turns, False, 0.75, (0.2, 0.1), 0.0) == 1.5
    assert episode_reward([TurnResult(0.0, False, "infra_error", "")], True, 0.75, (0.2,), 0.0) == 0.0


def test_group_retry_buffers_failed_groups_and_replays_them_to_the_whole_group():
    retry = GroupRetry(group_size=2, capacity=4, replay_prob=1.0, max_replays=1)
    assert retry.start("g1") is None  # empty buffer: the group runs its own prompt
    assert not retry.finish("g1", "task-a", "write relu", -1.0, False, "bad", "no code")
    assert retry.finish("g1", "task-a", "write relu", -0.25, False, "half", "2/4 passed")
    assert len(retry.buffer) == 1
    e = retry.start("g2")
    assert e.task == "task-a" and e.failed_response == "half" and e.feedback == "2/4 passed" and e.replays == 0
    assert retry.start("g2") is e  # the group's second sample repairs the same failure
    retry.finish("g2", "task-b", "other", -1.0, False, "x", "y")
    assert retry.finish("g2", "task-b", "other", -1.0, False, "x", "y")  # failed again: back in, replays 1
    again = retry.start("g3")
    assert again.task == "task-a" and again.prompt == "write relu" and again.replays == 1
    retry.finish("g3", "t", "p", -1.0, False, "x", "y")
    assert not retry.finish("g3", "t", "p", -1.0, False, "x", "y")  # max_replays spent
    retry.start("g4")
    retry.finish("g4", "t", "p", 1.5, True, "ok", "")
    assert not retry.finish("g4", "t", "p", -1.0, False, "x", "y") and len(retry.buffer) == 0  # a pass: no retry


# ---- MirrorPop as verl's policy loss "mirrorpop" -------------------------------------------------------------------
def _actor_config(delta, loss_mode="mirrorpop"):
    """An actor config built as verl's worker builds it (hydra `_target_`s, `omega_conf_to_dataclass`)."""
    from omegaconf import OmegaConf
    from verl.utils.config import omega_conf_to_dataclass

    return omega_conf_to_dataclass(OmegaConf.create({
        "_target_": "verl.workers.config.FSDPActorConfig", "strategy": "fsdp", "rollout_n": 8,
        "ppo_micro_batch_size_per_gpu": 1, "clip_ratio_low": 0.2, "clip_ratio_high": 0.28,
        "policy_loss": {"_target_": "verl.workers.config.PolicyLossConfig", "loss_mode": loss_mode,
                        "rollout_correction": {"rollout_rs_threshold": delta}}}))


def test_mirrorpop_is_a_registered_verl_policy_loss():
    """verl's actor looks the loss up by `policy_loss.loss_mode` and calls it with these keywords
    (verl/workers/utils/losses.py `ppo_loss`); sequences with mean |log π_θ − log π_old| > δ leave the loss."""
    pytest.importorskip("verl", reason=VERL_MISSING)
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla, get_policy_loss_fn

    import musacoder.integrations.verl  # noqa: F401 - importing registers the loss (model.external_lib)

    config = _actor_config(0.5)
    # what ppo_loss sets before the call: the token count of the whole mini-batch (here: this one)
    config.global_batch_info.update({"dp_size": 1, "batch_num_tokens": 7, "global_batch_size": 3,
                                     "loss_scale_factor": None})
    loss_fn = get_policy_loss_fn(config.policy_loss.get("loss_mode", "vanilla"))
    old = torch.tensor([[-1.0, -2.0, -1.0], [-0.5, -0.5, -0.5], [-1.0, -1.0, -1.0]])
    log_ratio = torch.tensor([[1.0, -1.0, 0.0], [0.1, -0.1, 0.05], [0.3, 0.3, 9.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 0]]).to(bool)
    adv = torch.tensor([[1.0], [-1.0], [0.5]]).expand(3, 3)
    current = (old + log_ratio).requires_grad_()
    loss, metrics = loss_fn(old_log_prob=old, log_prob=current, advantages=adv, response_mask=mask,
                            loss_agg_mode="token-mean", config=config, rollout_is_weights=None)
    # |+1|,|-1| → mean 1 > δ although the signed mean is 0: popped; the other two stay
    keep = mirrorpop_keep(log_ratio, torch.zeros_like(log_ratio), mask, 0.5)
    assert keep.tolist() == [False, True, True]
    assert metrics["actor/mirrorpop_popped"] == pytest.approx(1 / 3)
    assert metrics["actor/mirrorpop_popped_signed_rule"] == 0.0
    assert metrics["actor/log_rho_abs_mean"] == pytest.approx((1.0 + 0.25 / 3 + 0.3) / 3)
    # the loss is verl's PPO-clip loss over the kept sequences (popped tokens stay in the token-mean's denominator)
    kept_mask = mask & keep.unsqueeze(-1)
    want = compute_policy_loss_vanilla(old_log_prob=old, log_prob=old + log_ratio, advantages=adv,
                                       response_mask=kept_mask, loss_agg_mode="token-mean", config=config)[0]
    assert float(loss.detach()) == pytest.approx(float(want))
    loss.backward()
    assert current.grad[0].abs().sum() == 0 and current.grad[1].abs().sum() > 0  # no gradient from a popped sequence
    # δ large enough: nothing popped, and the loss is verl's vanilla loss exactly
    loose, m2 = loss_fn(old_log_prob=old, log_prob=old + log_ratio, advantages=adv, response_mask=mask,
                        loss_agg_mode="token-mean", config=_actor_config(10.0), rollout_is_weights=None)
    vanilla = get_policy_loss_fn("vanilla")(old_log_prob=old, log_prob=old + log_ratio, advantages=adv,
                                            response_mask=mask, loss_agg_mode="token-mean", config=config)[0]
    assert m2["actor/mirrorpop_popped"] == 0.0 and float(loose) == pytest.approx(float(vanilla))
    with pytest.raises(ValueError, match="rollout_rs_threshold"):
        loss_fn(old_log_prob=old, log_prob=current, advantages=adv, response_mask=mask, config=_actor_config(None))


# ---- the agent loop against a fake model server --------------------------------------------------------------------
def _tokenizer():
    pytest.importorskip("tokenizers", reason="tokenizers builds the test tokenizer: pip install -e '.[train]'")
    import string

    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<pad>", "<|im_start|>", "<|im_end|>"]
    vocab = {t: i for i, t in enumerate(specials + list(string.printable))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return fast


class FakeModelServer:
    """verl's LLM server client: answers turn k of a conversation with `script[k-1]`, log-prob −0.5 per token, and
    records the prompt of every call."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script = tokenizer, script
        self.prompts: list[str] = []
        self.calls: dict[str, int] = {}

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        from verl.workers.rollout.replica import TokenOutput

        text = self.tokenizer.decode(prompt_ids)
        self.prompts.append(text)
        turn = text.count("<|im_start|>assistant")
        reply = self.script(text)[turn - 1] if callable(self.script) else self.script[turn - 1]
        ids = self.tokenizer.encode(reply + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def _loop(tokenizer, server, url, n=2, **options):
    pytest.importorskip("verl", reason=VERL_MISSING)
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from musacoder.integrations import verl as integ

    integ._RETRY.clear()
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 8192, "response_length": 8192,
                                                              "n": n}}, "data": {}})
    return integ.MooreEvalAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tokenizer,
                                    processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data),
                                    service_url=url, **options)


def _row(task="level1/19_ReLU", prompt="Write ModelNew for ReLU."):
    return {"raw_prompt": [{"role": "user", "content": prompt}], "reward_model": {"ground_truth": task},
            "extra_info": {"backend": "cpu"}}


def _spans(tokenizer, out):
    """(text of mask-1 tokens, text of mask-0 tokens) of an AgentLoopOutput's response."""
    ones = [t for t, m in zip(out.response_ids, out.response_mask) if m == 1]
    zeros = [t for t, m in zip(out.response_ids, out.response_mask) if m == 0]
    return tokenizer.decode(ones), tokenizer.decode(zeros)


def test_agent_loop_primeecho_masks_feedback_and_later_turns(service):
    url, fake = service
    tok = _tokenizer()
    server = FakeModelServer(tok, ["<think>secret plan</think>HALF", "fixed: PASS"])
    out = asyncio.run(_run(lambda: _loop(tok, server, url), _row()))
    assert out.reward_score == pytest.approx(primeecho_reward([-0.25, 1.5], [False, True], 0.75, (0.2, 0.1)))
    assert out.num_turns == 4 and out.extra_fields["turn_scores"] == [-0.25, 1.5]
    trained, masked = _spans(tok, out)
    assert trained == "<think>secret plan</think>HALF<|im_end|>"  # PrimeEcho: the first response only
    assert "=== System Feedback for Round 1 ===" in masked and "fixed: PASS" in masked
    assert len(out.response_logprobs) == len(out.response_ids) == len(out.response_mask)
    assert [lp for lp, m in zip(out.response_logprobs, out.response_mask) if m] == [-0.5] * len(tok.encode(trained))
    assert "secret plan" not in server.prompts[1] and "HALF" in server.prompts[1]  # earlier thinking stripped
    info = out.extra_fields["reward_extra_info"]
    assert info["first_score"] == -0.25 and info["best_score"] == 1.5 and info["pass_turn"] == 2.0
    assert [c for _, c in fake.seen] == ["<think>secret plan</think>HALF", "fixed: PASS"]


def test_agent_loop_all_turns_trains_every_response_but_not_feedback(service):
    url, _ = service
    tok = _tokenizer()
    server = FakeModelServer(tok, ["junk", "HALF", "still HALF"])
    out = asyncio.run(_run(lambda: _loop(tok, server, url, loss_turns="all", primeecho=False), _row()))
    trained, masked = _spans(tok, out)
    assert trained == "junk<|im_end|>HALF<|im_end|>still HALF<|im_end|>"
    assert masked.count("=== System Feedback for Round") == 2 and "junk" not in masked
    assert out.reward_score == -0.25 and out.extra_fields["turn_scores"] == [-1.0, -0.25, -0.25]
    # the trajectory is what the model saw: each turn's prompt is the trajectory so far
    assert tok.decode(out.prompt_ids) + tok.decode(out.response_ids) == \
        server.prompts[2] + "still HALF<|im_end|>"


def test_agent_loop_replays_a_failed_group_as_a_repair_prompt(service):
    """Buffered Dynamic Retry: a group (n=2) whose samples all failed comes back, to a later group, as a repair
    prompt with its task, failed answer and feedback; the replayed task is the one verified."""
    pytest.importorskip("verl", reason=VERL_MISSING)
    url, fake = service
    tok = _tokenizer()
    server = FakeModelServer(tok, lambda prompt: ["PASS" if "previous answer" in prompt else "junk"])
    options = dict(max_turns=1, retry_prob=1.0)
    from musacoder.integrations import verl as integ

    integ._RETRY.clear()  # a fresh retry state for this process
    first = asyncio.run(_run_pair(tok, server, url, _row("level1/19_ReLU", "Write ReLU."), **options))
    assert [o.reward_score for o in first] == [-1.0, -1.0]
    assert all(o.extra_fields["reward_extra_info"]["replay"] == 0.0 for o in first)
    second = asyncio.run(_run_pair(tok, server, url, _row("level1/20_Other", "Write Other."), **options))
    assert [o.reward_score for o in second] == [pytest.approx(1.5 + 0.2)] * 2  # a pass at turn 1: b₁
    assert all(o.extra_fields["reward_extra_info"]["replay"] == 1.0 for o in second)
    assert "A previous answer to this task failed" in server.prompts[-1] and "Write ReLU." in server.prompts[-1]
    assert "junk" in server.prompts[-1] and "No code block found." in server.prompts[-1]
    assert [t for t, _ in fake.seen[-2:]] == ["level1/19_ReLU", "level1/19_ReLU"]  # the buffered task, not 20


def _loop_keep_retry(tok, server, url, **options):
    """A loop sharing the process's retry state (no reset)."""
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from musacoder.integrations import verl as integ

    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 8192, "response_length": 8192,
                                                              "n": 2}}, "data": {}})
    return integ.MooreEvalAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=tok,
                                    processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data),
                                    service_url=url, **options)


async def _run(make, row):
    """Run one episode; the loop is made inside the running event loop, as verl's worker makes it."""
    return await make().run({"temperature": 1.0}, **row)


async def _run_pair(tok, server, url, row, **options):
    return await asyncio.gather(*(_run(lambda: _loop_keep_retry(tok, server, url, **options), row)
                                  for _ in range(2)))


class PerEpisodeServer(FakeModelServer):
    """Each episode (one `request_id`) follows the next script of `scripts`, turn by turn."""

    def __init__(self, tokenizer, scripts):
        super().__init__(tokenizer, None)
        self.scripts, self.episodes = list(scripts), {}

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(self.tokenizer.decode(prompt_ids))
        if request_id not in self.episodes:
            self.episodes[request_id] = self.scripts[len(self.episodes)]
        script = self.episodes[request_id]
        turn = self.calls[request_id] = self.calls.get(request_id, 0) + 1
        ids = self.tokenizer.encode(script[turn - 1] + "<|im_end|>", add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def _episodes(tok, server, url, rows, **options):
    """Run `rows` one after another (each a fresh loop, as verl makes one per sample) on one retry state."""
    async def go():
        return [await _run(lambda: _loop_keep_retry(tok, server, url, **options), row) for row in rows]

    return asyncio.run(go())


@pytest.mark.parametrize("script, want", [
    (["HALF one", "junk two", "junk three"], ("HALF one", "2/4 trials passed", -0.25)),
    (["junk one", "HALF two", "junk three"], ("HALF two", "2/4 trials passed", -0.25)),
    (["junk one", "junk two", "HALF three"], ("HALF three", "2/4 trials passed", -0.25)),
    (["junk one", "junk two", "junk three"], ("junk one", "No code block found.", -1.0)),
])
def test_retry_buffer_keeps_each_turns_own_code_feedback_and_score(service, script, want):
    """A failed three-turn episode offers its best turn to the buffer: that turn's response with that turn's feedback
    and score, whichever turn it was (not the last turn's text beside the best turn's feedback)."""
    pytest.importorskip("verl", reason=VERL_MISSING)
    from musacoder.integrations import verl as integ

    url, _ = service
    tok = _tokenizer()
    mate = ["junk a", "junk b", "junk c"]  # the group's other sample: three plain failures, all below HALF
    server = PerEpisodeServer(tok, [script, mate])
    integ._RETRY.clear()
    outs = _episodes(tok, server, url, [_row(), _row()], max_turns=3, retry_prob=1.0)
    assert [o.extra_fields["turn_scores"] for o in outs][1] == [-1.0, -1.0, -1.0]
    [retry] = integ._RETRY.values()
    [entry] = retry.buffer.state_dict()["entries"]
    text, feedback, score = want
    assert entry.failed_response == text and feedback in entry.feedback and entry.score == score
    assert entry.task == ("level1/19_ReLU", {"backend": "cpu"}) and entry.prompt == "Write ModelNew for ReLU."


def test_retry_turn_picks_one_turn():
    from musacoder.integrations.verl import retry_turn

    turns = [TurnResult(-1.0, False, "extract_error", "no code", "a"),
             TurnResult(0.0, False, "infra_error", "down", "b"), TurnResult(-0.25, False, "incorrect", "2/4", "c")]
    assert retry_turn(turns) is turns[2]  # an unjudged turn (scored infra_score 0.0) is never the one buffered
    assert retry_turn(turns[:2]) is turns[0]
    assert retry_turn(turns + [TurnResult(1.5, True, "ok", "", "d")]) is None


def test_validation_rows_are_never_replayed_nor_buffered(service):
    """verl 0.9.1 does not tell the loop it validates; rows marked extra_info.split = "val" keep their own prompt
    while the buffer holds a failure, and their own failures are not buffered."""
    pytest.importorskip("verl", reason=VERL_MISSING)
    from musacoder.integrations import verl as integ

    url, fake = service
    tok = _tokenizer()
    server = FakeModelServer(tok, lambda prompt: ["PASS" if "previous answer" in prompt else "junk"])
    integ._RETRY.clear()
    options = dict(max_turns=1, retry_prob=1.0)
    _episodes(tok, server, url, [_row("level1/19_ReLU", "Write ReLU.")] * 2, **options)  # a failed train group
    [retry] = integ._RETRY.values()
    assert len(retry.buffer) == 1
    val = _row("level1/20_Other", "Write Other.")
    val["extra_info"] = {"backend": "cpu", "split": "val"}
    outs = _episodes(tok, server, url, [val, val], **options)
    assert all(o.extra_fields["reward_extra_info"]["replay"] == 0.0 for o in outs)
    assert all("previous answer" not in p for p in server.prompts[-2:]) and fake.seen[-1][0] == "level1/20_Other"
    assert len(retry.buffer) == 1  # the entry waits for a training group; the failed validation group is not added
    train = _episodes(tok, server, url, [_row("level1/20_Other", "Write Other.")] * 2, **options)
    assert all(o.extra_fields["reward_extra_info"]["replay"] == 1.0 for o in train) and len(retry.buffer) == 0


def test_single_turn_warmup_then_multi_turn_by_verls_global_step(service):
    """single_turn_steps = 2: verl's training steps 1 and 2 run one response scored s₁ (stage A), step 3 runs up to
    max_turns responses scored by PrimeEcho (stage B)."""
    pytest.importorskip("verl", reason=VERL_MISSING)
    url, _ = service
    tok = _tokenizer()
    options = dict(max_turns=3, single_turn_steps=2, retry=False)

    def episode(step, script):
        row = {**_row(), "global_steps": step}
        server = FakeModelServer(tok, script)
        return asyncio.run(_run(lambda: _loop(tok, server, url, **options), row)), server

    for step in (0, 1, 2):
        out, server = episode(step, ["HALF", "PASS"])
        assert len(server.prompts) == 1 and out.extra_fields["turn_scores"] == [-0.25] and out.reward_score == -0.25
        assert out.extra_fields["reward_extra_info"]["multi_turn"] == 0.0
    out, _ = episode(1, ["PASS"])
    assert out.reward_score == 1.5  # s₁, without PrimeEcho's early bonus
    out, server = episode(3, ["HALF", "PASS"])
    assert len(server.prompts) == 2 and out.extra_fields["reward_extra_info"]["multi_turn"] == 1.0
    assert out.reward_score == pytest.approx(primeecho_reward([-0.25, 1.5], [False, True], 0.75, (0.2, 0.1)))
    with pytest.raises(ValueError, match="global_steps"):
        asyncio.run(_run(lambda: _loop(tok, FakeModelServer(tok, ["HALF"]), url, **options), _row()))


def test_verls_own_dispatch_hands_the_loop_global_steps_but_not_validate(service, monkeypatch):
    """verl's `AgentLoopWorker._run_agent_loop` (the step from a batch row to `run`): the row's fields reach the loop
    (the v1 worker adds `global_steps`, `uid`, `session_id` to them), the trajectory's `validate` flag does not."""
    pytest.importorskip("verl", reason=VERL_MISSING)
    from types import SimpleNamespace

    from omegaconf import OmegaConf
    from verl.experimental.agent_loop import agent_loop as verl_loop

    url, _ = service
    tok = _tokenizer()
    entry = {"_target_": "musacoder.integrations.verl.MooreEvalAgentLoop", "service_url": url, "max_turns": 3,
             "single_turn_steps": 2, "retry": False}
    monkeypatch.setitem(verl_loop._agent_loop_registry, "mooreeval_warmup", entry)
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 8192, "response_length": 8192,
                                                              "n": 2}}, "data": {}})
    seen = []

    async def postprocess(output, validate, **kwargs):
        seen.append((validate, sorted(kwargs)))
        return output

    def dispatch(step, validate):
        server = FakeModelServer(tok, ["HALF", "PASS"])
        worker = SimpleNamespace(config=cfg, llm_client=server, tokenizer=tok, processor=None, hf_model_type=None,
                                 dataset_cls=None, tools=[], _agent_loop_postprocess=postprocess)
        trajectory = {"step": step, "sample_index": 0, "rollout_n": 0, "validate": validate}
        out = asyncio.run(verl_loop.AgentLoopWorker._run_agent_loop(
            worker, {"temperature": 1.0}, trajectory, agent_name="mooreeval_warmup", trace=False,
            **_row(), global_steps=step, uid="u0", session_id=0))
        return out, server

    out, server = dispatch(1, False)
    assert len(server.prompts) == 1 and out.extra_fields["reward_extra_info"]["multi_turn"] == 0.0
    out, server = dispatch(3, True)
    assert len(server.prompts) == 2 and out.extra_fields["reward_extra_info"]["multi_turn"] == 1.0
    assert seen[-1][0] is True and "validate" not in seen[-1][1] and "global_steps" in seen[-1][1]
