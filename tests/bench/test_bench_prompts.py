import pytest

from musacoder.candidates import extract_code
from musacoder.prompts import backends, conversation, feedback_message, first_turn_messages, user_prompt
from musacoder.prompts.examples import EXAMPLE_SOLUTIONS
from musacoder.prompts.metadata import task_metadata


@pytest.mark.parametrize("backend", ["cuda", "triton", "cpu"])
def test_prompt_per_backend(backend, fixture_tasks):
    task = fixture_tasks[0]
    msgs = first_turn_messages(task.source, backend)
    assert [m["role"] for m in msgs] == ["system", "user"]
    text = msgs[1]["content"]
    assert task.source.strip() in text and "class ModelNew(nn.Module)" in text
    if backend == "cuda":
        assert "cuda_sources" in text
    if backend == "cpu":
        assert "cpp_sources` only" in text and "no `cuda_sources`" in text
    if backend == "triton":
        assert "@triton.jit" in text
    few = user_prompt(task.source, backend, few_shot=True)
    assert "Example answer" in few and len(few) > len(text)


@pytest.mark.parametrize("backend", ["cuda", "triton", "cpu"])
def test_few_shot_examples_extract_with_their_backend(backend):
    cand = extract_code(f"```python\n{EXAMPLE_SOLUTIONS[backend]}```")
    assert cand.extract_error is None and cand.backend == backend
    assert set(backends()) == {"cuda", "triton", "cpu", "musa"}


def test_feedback_and_conversation_strip_think():
    fb = feedback_message(2, "Your kernel ran but its outputs are wrong.", passed=False)
    assert fb.startswith("=== System Feedback for Round 2 ===\n")
    assert "outputs are wrong" in fb and "```python" in fb
    # a verifier-supplied header is not doubled; an empty feedback gets the branch instruction
    assert feedback_message(1, "=== System Feedback for Round 1 ===\nok", True).count("System Feedback") == 1
    assert "faster" in feedback_message(1, "", True) and "fix correctness" in feedback_message(1, "", False)
    first = first_turn_messages("SRC", "cpu")
    msgs = conversation(first, ["<think>secret plan</think>\nanswer 1", "answer 2"], [("bad", False), ("good", True)])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert msgs[2]["content"] == "answer 1" and "secret" not in str(msgs)
    assert msgs[3]["content"].startswith("=== System Feedback for Round 1 ===")
    assert msgs[5]["content"].startswith("=== System Feedback for Round 2 ===")


def test_metadata_from_meta_device_with_overrides(fixture_tasks):
    lin = fixture_tasks[1].model_copy(update={"overrides": {"batch_size": 3}})
    meta = task_metadata(lin)
    assert "input `x`: tensor float32, shape (3, 16), stride (16, 1), contiguous" in meta
    assert "parameter `linear.weight`: tensor float32, shape (8, 16)" in meta
    assert "output: tensor float32, shape (3, 8)" in meta
    assert "Model(*init inputs): int 16, int 8, float 0.5" in meta
    prompt = user_prompt(lin.source, "cpu", metadata=meta)
    assert meta in prompt
