"""False rejects of the static legality rules: honest candidates in the styles models imitate must pass, and their
illegal look-alikes must still be rejected. Static only (nothing is built), so the whole set runs in CI.

- KernelBench's own prompt examples, read from `$KERNELBENCH_DIR/src/kernelbench/prompts/` (default
  `../shared/kernelbench`). Not covered there: `model_new_ex_0.py` (empty), `model_new_ex_2.py` (a template with
  `<placeholders>`, not Python), the CuTe, TileLang and HIP examples (other toolchains than musacoder's backends), and
  `cot/` (reference models and reasoning text, no ModelNew). `few_shot/model_new_ex_mnist2.py` keeps conv/linear/relu in
  PyTorch, so it is not all-custom and must be rejected.
- `candidates/legal/`: published dataset and paper styles (extension on `self`, in a dict or list, module-level alias,
  builder functions, `functools.partial`, lambdas, Triton launchers, several extensions, CPU C++ only, …).
- `candidates/illegal/`: look-alikes that route PyTorch compute through the same indirections; each file's docstring
  names a phrase the verdict must carry.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from musacoder.legality.static import check_static

HERE = Path(__file__).parent
REPO = HERE.parents[1]
KERNELBENCH = Path(os.environ.get("KERNELBENCH_DIR", REPO.parent / "shared" / "kernelbench"))
PROMPTS = KERNELBENCH / "src" / "kernelbench" / "prompts"
LEGAL = sorted((HERE / "candidates" / "legal").glob("*.py"))
ILLEGAL = sorted((HERE / "candidates" / "illegal").glob("*.py"))

# KernelBench prompt examples that are correct and all-custom, with their backend.
PROMPT_ALL_CUSTOM = [
    ("model_new_ex_add.py", "cuda"),
    ("model_new_ex_1.py", "cuda"),
    ("model_new_ex_add_triton.py", "triton"),
    ("model_new_ex_add_thunderkittens.py", "cuda"),
    ("few_shot/model_new_ex_add.py", "cuda"),
    ("few_shot/model_new_ex_fuse_gelu.py", "cuda"),
    ("few_shot/model_new_ex_tiled_matmul.py", "cuda"),
    ("few_shot/model_new_ex_flash_attn.py", "cuda"),
]
# Prompt examples that leave compute to PyTorch: (file, backend, phrase the violations must carry).
PROMPT_NOT_ALL_CUSTOM = [
    ("few_shot/model_new_ex_mnist2.py", "cuda", "torch.nn.functional.relu"),
]


def _backend(code: str) -> str:
    if "@triton.jit" in code:
        return "triton"
    return "cuda" if "cuda_sources" in code else "cpu"


def _prompt(rel: str) -> str:
    if not PROMPTS.is_dir():
        pytest.skip(f"KernelBench prompts not found at {PROMPTS} (set KERNELBENCH_DIR to a KernelBench checkout)")
    path = PROMPTS / rel
    if not path.exists():
        pytest.skip(f"{rel} is not in this KernelBench version ({PROMPTS})")
    return path.read_text()


@pytest.mark.parametrize("rel,backend", PROMPT_ALL_CUSTOM, ids=[r for r, _ in PROMPT_ALL_CUSTOM])
def test_kernelbench_prompt_example_passes(rel, backend):
    rep = check_static(_prompt(rel), backend)
    assert rep.violations == [], rep.violations
    assert rep.kernel_calls, "the example's kernel call should be resolved, not deferred"


@pytest.mark.parametrize("rel,backend,phrase", PROMPT_NOT_ALL_CUSTOM, ids=[r for r, _, _ in PROMPT_NOT_ALL_CUSTOM])
def test_kernelbench_prompt_example_with_pytorch_compute_is_rejected(rel, backend, phrase):
    rep = check_static(_prompt(rel), backend)
    assert any(phrase in v for v in rep.violations), rep.violations


@pytest.mark.parametrize("path", LEGAL, ids=[p.stem for p in LEGAL])
def test_legal_candidate_passes(path):
    code = path.read_text()
    rep = check_static(code, _backend(code))
    assert rep.violations == [], rep.violations
    assert rep.kernel_calls or rep.deferred


@pytest.mark.parametrize("path", ILLEGAL, ids=[p.stem for p in ILLEGAL])
def test_illegal_lookalike_is_rejected(path):
    code = path.read_text()
    phrase = ast.get_docstring(ast.parse(code)).split("Must be rejected: ", 1)[1].strip()
    rep = check_static(code, _backend(code))
    assert any(phrase in v for v in rep.violations), (phrase, rep.violations)


def test_false_reject_rate_is_zero():
    """The headline number: of all honest candidates here, none is rejected statically."""
    assert len(LEGAL) >= 20
    rejected = [p.stem for p in LEGAL if check_static(p.read_text(), _backend(p.read_text())).violations]
    assert rejected == []


@pytest.mark.slow
def test_extension_on_self_verifies_end_to_end():
    """The KernelBench style (extension kept on `self`) goes through the whole verifier on the CPU (one C++ build)."""
    from musacoder import VerifyConfig, verify

    code = (HERE / "candidates" / "legal" / "cpu_ext_on_self.py").read_text()
    cfg = VerifyConfig(repeats=5, max_repeats=10, time_budget_s=2.0, warmup=1)
    v = verify(REPO / "examples" / "tasks" / "relu.py", code, backend="cpu", config=cfg)
    assert v.status == "ok", v.feedback
