"""KernelEnv and the episode API with a fake verifier: turns, early stop, thinking stripped, async submission."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from musacoder.records import Verdict
from musacoder.rl import KernelEnv
from musacoder.rl.records import Outcome, RewardRecord, Turn, assemble_sample
from musacoder.rl.retry import RetryEntry
from musacoder.rl.toy import ToyEnv, ToyTask, toy_score


def test_reset_gives_the_kernel_prompt(relu_task, fake_verifier):
    env = KernelEnv(fake_verifier, backend="cpu")
    prompt = env.reset(relu_task)
    assert "torch.relu(x)" in prompt and "ModelNew" in prompt
    assert env.messages[-1] == {"role": "user", "content": prompt}
    assert not env.done


def test_multi_turn_episode_stops_on_pass_and_strips_thinking(relu_task, fake_verifier):
    env = KernelEnv(fake_verifier, backend="cpu", max_turns=3, overrides={"n": 8})
    env.reset(relu_task)
    feedback, score, done = env.step("<think>secret plan</think>attempt HALF")
    assert (score, done) == (-0.25, False)
    assert "=== System Feedback for Round 1 ===" in feedback and "2/4 trials passed" in feedback
    assert env.messages[-2] == {"role": "assistant", "content": "attempt HALF"}  # thinking stripped
    assert env.messages[-1]["content"] == feedback
    _, score, done = env.step("<think>x</think>now PASS")
    assert (score, done) == (1.5, True)
    assert [o.passed for o in env.history] == [False, True]
    assert fake_verifier.calls[0][2] == {"backend": "cpu", "overrides": {"n": 8}}


def test_episode_ends_after_max_turns(relu_task, fake_verifier):
    env = KernelEnv(fake_verifier, max_turns=2)
    env.reset(relu_task)
    assert env.step("junk")[2] is False
    assert env.step("junk")[2] is True
    assert [o.score for o in env.history] == [-1.0, -1.0]


def test_verifier_crash_becomes_infra_error(relu_task):
    def broken(*a, **k):
        raise RuntimeError("worker died")

    env = KernelEnv(broken, max_turns=1)
    env.reset(relu_task)
    feedback, score, done = env.step("PASS")
    assert score == -1.0 and done and env.history[0].status == "infra_error"
    assert "worker died" in env.history[0].feedback


def test_submit_does_not_block_on_verification(relu_task):
    release = threading.Event()

    def slow(task, candidate, **kw):
        release.wait(5)
        return Verdict(status="ok", compiled=True, legal=True, correct=True, reward=1.0, feedback="ok")

    with ThreadPoolExecutor(2) as pool:
        envs = [KernelEnv(slow, executor=pool) for _ in range(3)]
        for e in envs:
            e.reset(relu_task)
        t0 = time.perf_counter()
        futures = [e.submit("PASS") for e in envs]
        assert time.perf_counter() - t0 < 1.0 and not any(f.done() for f in futures)
        release.set()
        outcomes = [f.result(timeout=5) for f in futures]
    assert all(o.passed for o in outcomes)
    for e, o in zip(envs, outcomes):
        assert e.record("PASS", o) == (e.feedback_message(1, o), 1.0, True)


def test_repair_prompt_carries_failed_code_and_feedback(relu_task, fake_verifier):
    env = KernelEnv(fake_verifier, backend="cpu")
    prompt = env.reset(relu_task)
    entry = RetryEntry(task=relu_task, prompt=prompt, failed_response="```python\nclass ModelNew: pass\n```",
                       feedback="Your kernel ran but its outputs are wrong.")
    repair = env.repair_prompt(entry)
    assert repair.startswith(prompt) and "class ModelNew: pass" in repair and "outputs are wrong" in repair
    assert env.reset(relu_task, prompt=repair) == repair


def test_toy_task_scoring():
    task = ToyTask("c", 3)
    assert toy_score(task, "ccc") == (1.0, True)
    assert toy_score(task, "cccab") == (1.0, True)
    assert toy_score(task, "cxc") == (2 / 3, False)
    assert toy_score(task, "") == (0.0, False)
    env = ToyEnv(max_turns=2)
    assert env.reset(task) == "c="
    assert env.step("abd") == ("|c=", 0.0, False)


def test_sample_concatenates_turns_with_feedback_masked():
    t1 = Turn(context_ids=[5, 6], response_ids=[7, 8], rollout_log_probs=[-0.1, -0.2], response_text="a",
              outcome=Outcome(-1.0, False, "fb"), feedback_ids=[9, 9, 9])
    t2 = Turn(context_ids=[5, 6, 7, 9, 9, 9], response_ids=[4], rollout_log_probs=[-0.3], response_text="b",
              outcome=Outcome(1.0, True, "ok"))
    reward = RewardRecord(reward=0.5, scores=[-1.0, 1.0], passed=[False, True], statuses=["x", "ok"], num_turns=2,
                          first_pass_turn=2)
    s = assemble_sample([t1, t2], reward, group=0)
    assert s.prompt_ids == [5, 6]
    assert s.response_ids == [7, 8, 9, 9, 9, 4]
    assert s.response_mask == [1, 1, 0, 0, 0, 1]
    assert s.rollout_log_probs == [-0.1, -0.2, 0.0, 0.0, 0.0, -0.3]
    verl = s.to_verl()
    assert verl["reward_score"] == 0.5 and verl["num_turns"] == 2 and verl["response_mask"] == s.response_mask
