"""Prompts for kernel generation: the first-turn prompt per backend and the feedback message of later turns.

Turn 1 is `[system, user]`; the user message carries the reference program, the backend's rules, optionally the
reference's shape/stride/dtype metadata (`metadata.task_metadata`) and optionally one worked example. After turn N
the conversation grows by `[assistant: response N with <think> blocks stripped, user: feedback for round N]`.
"""

from __future__ import annotations

from collections.abc import Sequence

from musacoder.candidates import strip_think
from musacoder.prompts.examples import EXAMPLE_REFERENCE, EXAMPLE_SOLUTIONS

FEEDBACK_HEADER = "=== System Feedback for Round {n} ==="

_BACKEND_RULES = {
    "cuda": (
        "CUDA C++ kernels",
        "Write the kernels in CUDA C++ and build them inside the module with "
        "`torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., cuda_sources=..., functions=[...])`: "
        "`cuda_sources` holds the `__global__` kernels and their host launchers, `cpp_sources` the launchers' "
        "declarations, `functions` the names to bind.",
    ),
    "musa": (
        "MUSA C++ kernels for Moore Threads GPUs",
        "Write the kernels in MUSA C++ (CUDA-like: `__global__` kernels, `musa_runtime.h`, `musaStream_t`, "
        "`c10::musa::getCurrentMUSAStream()`, `c10::musa::OptionalMUSAGuard`, `C10_MUSA_KERNEL_LAUNCH_CHECK()`) and "
        "build them inside the module with torch_musa's builder: `import torch_musa` and "
        "`torch_musa.utils.musa_extension.load_inline(name=..., cpp_sources=..., musa_sources=..., functions=[...])`: "
        "`musa_sources` holds the kernels and their host launchers, `cpp_sources` the launchers' declarations. "
        "Tensors live on the `musa` device; check them with `.is_privateuseone()` in C++.",
    ),
    "triton": (
        "Triton kernels",
        "Write the kernels in Triton (`@triton.jit` functions using `triton.language`) and launch them from "
        "`ModelNew.forward` with an explicit grid.",
    ),
    "cpu": (
        "C++ CPU kernels",
        "Write the kernels in plain C++17 over raw data pointers (`tensor.data_ptr<float>()`) and build them inside "
        "the module with `torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., functions=[...])` "
        "(`cpp_sources` only, no `cuda_sources`). Inside C++, use ATen only for allocation and layout "
        "(`torch::empty`, `.contiguous()`), never for compute (`at::matmul`, `torch::relu`, …).",
    ),
}

_COMMON_RULES = """\
- Answer with exactly one ```python code block (after any reasoning) holding a complete, self-contained module that \
defines `class ModelNew(nn.Module)` with the same `__init__` and `forward` signatures as `Model`.
- {backend_rule}
- Keep the reference's parameter-holding submodules (`nn.Linear`, `nn.Conv2d`, …) as attributes with the same names, \
so the reference's state dict loads into `ModelNew`, but do not call them: pass their `.weight`/`.bias` to your kernels.
- In `forward`, PyTorch may only allocate and arrange tensors (`empty`, `empty_like`, `zeros`, `ones`, `full`, \
`arange`, `view`, `reshape`, `flatten`, `permute`, `transpose`, `expand`, `squeeze`, `unsqueeze`, `contiguous`, \
`clone`, `as_strided`). All computation (matmul, convolution, reductions, elementwise math, activations, \
normalisation, …) must run in your kernels; calling PyTorch compute ops or the reference's modules is an illegal \
fallback and scores as a failure.
- The outputs must match the reference (shape, dtype, values within floating-point tolerance) on random inputs. \
Among correct solutions, faster is better."""


def backends() -> tuple[str, ...]:
    return tuple(_BACKEND_RULES)


def system_prompt(backend: str) -> str:
    what = _BACKEND_RULES[backend][0]
    return (f"You are an expert performance engineer. You replace PyTorch reference programs with {what} that "
            "compute the same results faster.")


SIX_STEP = """\
Solve it in six steps, in your reasoning, before the code:
1. Semantic decomposition: what the reference computes, operation by operation.
2. Scalar math: the formula for one output element (accumulation order, dtype of the accumulator).
3. Shape computation: every output and intermediate shape from the input shapes above.
4. Index mapping: how a thread (or loop iteration) maps to output elements, and the input offsets it reads, from the \
strides above.
5. Boundary handling: tails where sizes are not multiples of the block, empty or size-1 dimensions, broadcast operands.
6. Error pre-analysis: what could go wrong (overflow, race, precision, non-contiguous inputs) and how the code \
avoids it.
Then give the complete module."""


def user_prompt(source: str, backend: str, metadata: str | None = None, few_shot: bool = False,
                six_step: bool = False) -> str:
    """The first-turn user message for one task: the reference, its metadata block when given, the rules, and the
    six-step scheme (`SIX_STEP`, the paper's structured reasoning) when `six_step`."""
    if backend not in _BACKEND_RULES:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(_BACKEND_RULES)}")
    what, rule = _BACKEND_RULES[backend]
    parts = [f"Replace the PyTorch reference program below with `ModelNew`, which computes the same outputs using "
             f"your own {what}."]
    if few_shot:
        parts += ["Example reference:", f"```python\n{EXAMPLE_REFERENCE.strip()}\n```",
                  "Example answer:", f"```python\n{EXAMPLE_SOLUTIONS[backend].strip()}\n```",
                  "Now the actual task."]
    parts += ["Reference program (`Model`):", f"```python\n{source.strip()}\n```"]
    if metadata:
        parts.append(metadata)
    parts += ["Requirements:", _COMMON_RULES.format(backend_rule=rule)]
    if six_step:
        parts.append(SIX_STEP)
    return "\n\n".join(parts)


def first_turn_messages(source: str, backend: str, metadata: str | None = None, few_shot: bool = False,
                        six_step: bool = False) -> list[dict[str, str]]:
    """System and first user message of a task, as bench, the data stages and RL send them."""
    return [{"role": "system", "content": system_prompt(backend)},
            {"role": "user", "content": user_prompt(source, backend, metadata, few_shot, six_step)}]


def feedback_message(round_n: int, feedback: str, passed: bool) -> str:
    """The user message after round `round_n` (1-based): the header, MooreEval's feedback (which already says what
    to do next: optimise only when correct, fix correctness first otherwise; supplied here when it is empty), and a
    reminder of the answer format."""
    body = feedback.strip()
    if body.startswith("=== System Feedback"):  # the verifier already added a header
        body = body.split("\n", 1)[1].strip() if "\n" in body else ""
    if not body:
        body = ("Your ModelNew is correct; make it faster without changing its results." if passed else
                "Your ModelNew failed; fix correctness first.")
    ask = "Answer with the complete updated module in one ```python block defining ModelNew."
    return "\n\n".join((FEEDBACK_HEADER.format(n=round_n), body, ask))


def conversation(first_turn: Sequence[dict[str, str]], responses: Sequence[str],
                 feedbacks: Sequence[tuple[str, bool]]) -> list[dict[str, str]]:
    """Messages for the next turn: the first-turn messages, then for each earlier round N the response (with its
    `<think>` blocks stripped) and the feedback message for round N. `feedbacks[i]` is (feedback text, passed)."""
    if len(responses) != len(feedbacks):
        raise ValueError("every earlier response needs its feedback")
    messages = [dict(m) for m in first_turn]
    for n, (response, (feedback, passed)) in enumerate(zip(responses, feedbacks), start=1):
        messages.append({"role": "assistant", "content": strip_think(response).strip()})
        messages.append({"role": "user", "content": feedback_message(n, feedback, passed)})
    return messages
