"""GPU adversarial suite and the CUDA/Triton run paths; skipped cleanly without a CUDA GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from musacoder import VerifyConfig, verify

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

HERE = Path(__file__).parent
REPO = HERE.parents[1]
RELU = REPO / "examples" / "tasks" / "relu.py"
CFG = VerifyConfig(timeout_s=60.0, repeats=10, max_repeats=20, time_budget_s=2.0)

CASES = [
    ("illegal_address", ("crashed", "runtime_error"), ""),
    ("infinite_loop", ("timeout",), "no reply"),
    ("absurd_allocation", ("runtime_error", "crashed"), ""),
    ("cublas_in_wrapper", ("illegal",), "aten::"),
    ("empty_output_allocator_reuse", ("incorrect",), ""),
    ("side_stream", ("illegal",), "torch.cuda.Stream"),
    ("native_side_stream", ("illegal",), "side streams"),
    ("background_thread", ("illegal",), "threading"),
    ("pointer_cache", ("incorrect", "illegal"), ""),
    ("memory_hog", ("illegal",), "GiB of GPU memory"),
]


def _text(v):
    return " | ".join([v.feedback, v.error or "", *v.violations, *(t.message for t in v.trials)])


@pytest.mark.parametrize("name,statuses,phrase", CASES, ids=[c[0] for c in CASES])
def test_gpu_hack_rejected(name, statuses, phrase):
    cfg = CFG.model_copy(update={"timeout_s": 15.0}) if name == "infinite_loop" else CFG  # the hang lasts the limit
    v = verify(RELU, (HERE / "candidates" / f"{name}.py").read_text(), backend="cuda", config=cfg)
    assert v.status in statuses, _text(v)
    assert phrase in _text(v)
    assert v.reward < 0


def test_valid_candidate_after_poisoned_context():
    bad = verify(RELU, (HERE / "candidates" / "illegal_address.py").read_text(), backend="cuda", config=CFG)
    good = verify(RELU, (REPO / "examples" / "candidates" / "relu_cuda.py").read_text(), backend="cuda",
                  config=CFG.model_copy(update={"clean_reference_reuse_s": 0}))  # timed here, not an earlier test's
    assert bad.status in ("crashed", "runtime_error")
    assert good.status == "ok", _text(good)
    assert good.speedup is not None and good.reward >= 1.0
    # the reference was timed again in a clean reference-only worker on the GPU, and the lower figure is the one used
    assert good.ref_runtime_ms_clean is not None and good.ref_runtime_ms_in_process is not None, good.flags
    assert good.ref_runtime_ms == pytest.approx(min(good.ref_runtime_ms_clean, good.ref_runtime_ms_in_process))  # τ = 1 on a GPU
    assert not any("was reused from" in f for f in good.flags)  # timed for this verification


def test_triton_on_gpu():
    v = verify(RELU, (REPO / "examples" / "candidates" / "relu_triton.py").read_text(), backend="triton", config=CFG)
    assert v.status == "ok", _text(v)


def test_a_kernel_that_reads_the_gpu_clock_is_seen_in_its_compiled_code(monkeypatch):
    """A clock in a kernel tells the profiled rounds from the timed ones. The source rules reject the register's name
    even split into literals; with them off here, the trusted side still finds the read in the extension's SASS
    (cuobjdump), and the worker finds it in the PTX of a Triton kernel whose asm string was built at import, which no
    source rule can read (read as Triton makes the compiled kernel)."""
    import musacoder.legality.static as static_rules
    from musacoder.legality.static import check_static

    code = (HERE / "candidates" / "clock_in_kernel.py").read_text()
    v = verify(RELU, code, backend="cuda", config=CFG)
    assert v.status == "illegal" and "reads the GPU's clock" in _text(v), _text(v)

    def no_static_violations(*args, **kwargs):
        got = check_static(*args, **kwargs)
        got.violations = []
        return got

    monkeypatch.setattr(static_rules, "check_static", no_static_violations)
    v = verify(RELU, code, backend="cuda", config=CFG)
    assert v.status == "illegal" and "SR_GLOBALTIMER" in _text(v), _text(v)
    v = verify(RELU, (HERE / "candidates" / "triton_clock_built_at_import.py").read_text(), backend="triton",
               config=CFG)
    assert v.status == "illegal" and "Triton kernel relu_kernel reads the GPU's clock (%globaltimer)" in _text(v), \
        _text(v)
