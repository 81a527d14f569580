"""The loss mask: exactly the tokens of the final (or `loss_turn`) assistant turn carry labels."""

import pytest

pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[train]' (or .[dev])")
pytest.importorskip("tokenizers", reason="tokenizers is not installed: pip install -e '.[train]' (or .[dev])")

from musacoder.sft.examples import (  # noqa: E402
    IGNORE_INDEX, PromptTooLong, resolve_loss_turn, tokenize_example)
from musacoder.sft.tokenizer import IM_END, chat_byte_tokenizer  # noqa: E402

REPAIR = [
    {"role": "system", "content": "You write CUDA kernels."},
    {"role": "user", "content": "Write ModelNew for ReLU."},
    {"role": "assistant", "content": "<think>hmm</think>WRONG KERNEL"},
    {"role": "user", "content": "=== System Feedback for Round 1 ===\ncompile error"},
    {"role": "assistant", "content": "FIXED KERNEL ünï"},
]


@pytest.fixture(scope="module")
def tok():
    return chat_byte_tokenizer()


def labelled(tok, ex) -> str:
    return tok.decode([t for t in ex.labels if t != IGNORE_INDEX], skip_special_tokens=False)


def test_loss_covers_exactly_the_final_assistant_turn(tok):
    ex = tokenize_example(tok, REPAIR)
    full = tok.apply_chat_template(REPAIR, tokenize=False)
    # ids are the conversation as the template renders it, byte for byte
    assert tok.decode(ex.input_ids, skip_special_tokens=False) == full
    target = "FIXED KERNEL ünï" + IM_END + "\n"
    assert labelled(tok, ex) == target
    n_target = len(tok(target, add_special_tokens=False)["input_ids"])
    # a contiguous block at the end: every token before it is masked, every token in it is its own label
    assert ex.labels[: -n_target] == [IGNORE_INDEX] * (len(ex.input_ids) - n_target)
    assert ex.labels[-n_target:] == ex.input_ids[-n_target:]
    assert ex.prompt_len == len(ex.input_ids) - n_target
    # the earlier assistant turn and the feedback are context only
    assert "WRONG" not in labelled(tok, ex) and "Feedback" not in labelled(tok, ex)
    assert "WRONG" in tok.decode(ex.input_ids[: ex.prompt_len])


def test_loss_turn_picks_an_earlier_assistant_turn_and_drops_what_follows(tok):
    ex = tokenize_example(tok, REPAIR, loss_turn=2)
    assert labelled(tok, ex) == "<think>hmm</think>WRONG KERNEL" + IM_END + "\n"
    assert "FIXED" not in tok.decode(ex.input_ids)  # later messages cannot affect turn 2 under causal attention
    assert tokenize_example(tok, REPAIR, loss_turn=-1) == tokenize_example(tok, REPAIR)


def test_bad_loss_turns_are_errors():
    assert resolve_loss_turn(REPAIR) == 4
    with pytest.raises(ValueError, match="points at a 'user' message"):
        resolve_loss_turn(REPAIR, 3)
    with pytest.raises(ValueError, match="outside"):
        resolve_loss_turn(REPAIR, 9)
    with pytest.raises(ValueError, match="no assistant message"):
        resolve_loss_turn(REPAIR[:2])


def test_max_len_truncates_the_target_or_rejects_a_prompt_that_fills_it(tok):
    ex = tokenize_example(tok, REPAIR)
    cut = tokenize_example(tok, REPAIR, max_len=ex.prompt_len + 3)
    assert cut.truncated and len(cut.input_ids) == ex.prompt_len + 3
    assert cut.labels == ex.labels[: ex.prompt_len + 3]
    with pytest.raises(PromptTooLong):
        tokenize_example(tok, REPAIR, max_len=ex.prompt_len)


def test_a_template_whose_prompt_is_not_a_prefix_is_refused(tok):
    # a template that renders the last message differently from earlier ones
    odd = chat_byte_tokenizer()
    odd.chat_template = ("{% for m in messages %}{% if loop.last %}[{{ m['content'] }}]{% else %}{{ m['content'] }}"
                         "{% endif %}{% endfor %}")
    with pytest.raises(ValueError, match="not a prefix"):
        tokenize_example(odd, REPAIR)
    odd.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        tokenize_example(odd, REPAIR)
