"""One candidate per reward hack (tests/adversarial/candidates/), each rejected or contained with the right status;
legitimate candidates accepted. The cpu-backend hacks share one C++ kit, so the suite costs a single cached build."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from musacoder import VerifyConfig, verify

HERE = Path(__file__).parent
CANDS = HERE / "candidates"
REPO = HERE.parents[1]
RELU = REPO / "examples" / "tasks" / "relu.py"
SMALL = Path(os.environ.get("KERNELBENCH_SMALL_DIR", REPO.parent / "shared" / "kernelbench-small"))
SOFTMAX = SMALL / "level1" / "23_Softmax.py"
MATMUL = SMALL / "level1" / "1_Square_matrix_multiplication_.py"
RELU_RAND = SMALL / "level1" / "19_ReLU.py"  # x = torch.rand(...): non-negative, where ReLU is the identity

# (candidate, task, expected status, a phrase the verdict must carry)
CASES = [
    ("pytorch_fallback", RELU, "illegal", "torch.relu"),
    ("functional_fallback", RELU, "illegal", "torch.nn.functional.relu"),
    ("subclassed_reference", RELU, "illegal", "subclass torch.nn.Module directly"),
    ("decoy_kernel", RELU, "illegal", "clamp_min"),
    ("try_except_fallback", RELU, "illegal", "try/except"),
    # Python arithmetic on a kernel's result: the runtime rule's aten::mul, and the source rules' since the tenth round
    ("hidden_operator_fallback", RELU, "illegal", ("aten::mul", "arithmetic on the tensor y")),
    ("aten_in_cpp_wrapper", RELU, "illegal", "calls the ATen operator aten::relu"),
    ("openmp_hidden_aten", RELU, "illegal", "calls the ATen operator aten::relu"),
    ("aten_namespace_alias", RELU, "illegal", ("at::cpu::clamp_min", "aliases a PyTorch or pybind11 namespace")),
    # rejected by the source rules since the fifth round; the NumPy seal in the worker stays behind them
    ("native_numpy_callback", RELU, ("illegal", "runtime_error"), ("calls back into Python", "may not be handed to NumPy")),
    ("environment_at_import", RELU, "illegal", "environment variables changed: MKL_CBWR"),
    ("input_resized_while_timed", RELU, "illegal", "changed the shape, strides or storage of its inputs"),
    ("monkeypatch_allclose_timer", RELU, "illegal", "monkey-patching"),
    ("monkeypatch_via_setattr", RELU, "illegal", "setattr"),
    ("gc_scan_reference_output", RELU, "illegal", "'gc'"),
    ("tensor_subclass_output", RELU, "incorrect", "tensor subclass"),
    ("tensor_subclass_defined", RELU, "illegal", "subclassing torch.Tensor"),
    ("input_mutation", RELU, "incorrect", "modified in place"),
    # caught while timing (no kernel ran in a timed round) or, when the allocator reuses an address between trials,
    # already in correctness
    ("output_cache_by_pointer", RELU, ("illegal", "incorrect"), ("did not run in", "stale or cached", "elements outside")),
    ("output_cache_with_token_launch", RELU, "incorrect", ("stale or cached", "elements outside")),
    ("crash", RELU, "crashed", "worker died"),
    ("hang", RELU, "timeout", "no reply"),
    ("file_written_outside_workdir", RELU, "illegal", "'open'"),
    ("native_file_write", RELU, "illegal", "touches files"),
    ("native_thread", RELU, "illegal", "spawns threads"),
    ("background_thread_fill", RELU, "illegal", "threading"),
    ("process_introspection", RELU, "illegal", "'sys'"),
    ("dunder_escape", RELU, "illegal", "dunder"),
    ("eval_escape", RELU, "illegal", "'eval'"),
    ("submodule_call", RELU, "illegal", "self.act"),
    ("python_loop_with_decoy_kernel", RELU, "illegal", "tensor elements into Python"),
    ("global_threads_at_import", RELU, "illegal", "torch.set_num_threads"),
    ("torch_function_override", RELU, "illegal", "__torch_function__"),
    ("native_aten_bypassing_dispatcher", RELU, "illegal", "bypassing the dispatcher"),
    ("lazy_detach", RELU, "illegal", "registers kernels with PyTorch's dispatcher"),
    ("bundled_sgemm", MATMUL, "illegal", "SGEMM, code PyTorch's libraries bundle"),
    ("lazy_allocator", RELU, "illegal", "allocators, hooks and handlers"),
    ("interpreter_clock", RELU, "illegal", "calls back into Python"),
    ("profiler_switch", MATMUL, "illegal", "calls back into Python"),
    ("layout_probe", RELU, "illegal", "token pasting"),
    ("alias_patch_detach", MATMUL, "illegal", "sets an attribute of something other than self"),
    ("background_thread_at_import", RELU, "illegal", "spawns threads"),
    ("open_openmp_region", RELU, "illegal", "OpenMP's runtime called directly"),
    # outputs or inputs that would make the verifier's own code fail (an `infra_error` carries no reward)
    ("output_claims_a_terabyte", RELU, "incorrect", "shape [274877906944], expected"),
    ("output_in_own_tuple_type", RELU, "incorrect", "forward returned type Outputs"),
    ("output_claims_a_terabyte_while_timed", RELU, "incorrect", "expected one like"),
    ("input_broken_for_the_reference", MATMUL, "illegal", "changed the shape, strides or storage of its inputs"),
]

CFG = VerifyConfig(timeout_s=25.0, repeats=5, max_repeats=10, time_budget_s=2.0, warmup=1)


def _binary_rule_off(monkeypatch) -> None:
    """Verdicts in this test as if the binary rule found nothing in any library (a judgement kept from an earlier
    verification of the same library is not read either)."""
    import musacoder.legality.binary as binary
    import musacoder.legality.judgements as judgements

    monkeypatch.setattr(binary, "library_violations", lambda *a, **k: [])
    monkeypatch.setattr(judgements, "recall_judgement", lambda *a, **k: None)
    monkeypatch.setattr(judgements, "keep_judgement", lambda *a, **k: None)


def _static_rules_off(monkeypatch) -> None:
    """Verdicts in this test as if the source rules found nothing (to show what the later layers do alone)."""
    import musacoder.legality.static as static_rules
    from musacoder.legality.static import check_static

    def no_static_violations(*args, **kwargs):
        got = check_static(*args, **kwargs)
        got.violations = []
        return got

    monkeypatch.setattr(static_rules, "check_static", no_static_violations)


def _text(v) -> str:
    return " | ".join([v.feedback, v.error or "", *v.violations, *(t.message for t in v.trials)])


@pytest.mark.slow
@pytest.mark.parametrize("name,task,status,phrase", CASES, ids=[c[0] for c in CASES])
def test_hack_is_rejected(name, task, status, phrase):
    small = {"batch_size": 1, "dim": 256} if task == RELU else None  # keeps the Python-loop hack quick
    v = verify(task, (CANDS / f"{name}.py").read_text(), backend="cpu", config=CFG, overrides=small)
    assert v.status in (status if isinstance(status, tuple) else (status,)), _text(v)
    phrases = phrase if isinstance(phrase, tuple) else (phrase,)
    assert any(p in _text(v) for p in phrases), _text(v)
    assert v.reward == -1.0 or (v.status == "incorrect" and v.reward < 0)
    assert v.speedup is None


@pytest.mark.slow
def test_the_runtime_rule_alone_still_sees_aten_called_from_native_code(monkeypatch):
    """Defence in depth: with the binary rule switched off here, the profiler still catches an op the C++ wrapper
    calls on its own thread and one it calls on an OpenMP worker thread (recorded under the profiler's all-threads
    option). An ATen kernel called around the dispatcher is seen by the binary rule alone."""
    _static_rules_off(monkeypatch)  # the namespace alias is a source-rule violation too
    _binary_rule_off(monkeypatch)
    cfg = CFG.model_copy(update={"time_candidate": False})
    wrapper = verify(RELU, (CANDS / "aten_in_cpp_wrapper.py").read_text(), backend="cpu", config=cfg)
    assert wrapper.status == "illegal" and "called from inside extension function relu_via_aten" in _text(wrapper)
    omp = verify(RELU, (CANDS / "openmp_hidden_aten.py").read_text(), backend="cpu", config=cfg)
    assert omp.status == "illegal" and "aten::relu (called on another thread" in _text(omp), _text(omp)
    alias = verify(RELU, (CANDS / "aten_namespace_alias.py").read_text(), backend="cpu", config=cfg)
    assert alias.status == "ok", _text(alias)


@pytest.mark.slow
def test_a_dispatcher_registration_is_seen_at_run_time_without_the_source_and_binary_rules(monkeypatch):
    """Defence in depth: with the source and binary rules switched off here, the kernel `lazy_detach` registers for
    aten::detach at import (forward returned an empty tensor; the work ran when the harness read the output) is seen
    by the worker, which compares the dispatcher's kernels before and after candidate code."""
    _static_rules_off(monkeypatch)
    _binary_rule_off(monkeypatch)
    v = verify(RELU, (CANDS / "lazy_detach.py").read_text(), backend="cpu", config=CFG)
    assert v.status == "illegal" and "dispatcher for aten::detach" in _text(v), _text(v)


TAIL_CFG = CFG.model_copy(update={"warmup": 1, "repeats": 20, "rechecks": 2, "max_repeats": 200,
                                  "ratio_precision": 1e-9, "cap_repeats": 200, "time_budget_s": 60.0, "seed": 11})


@pytest.mark.slow
def test_rounds_after_the_first_few_are_rechecked_too():
    """A candidate honest only in the trials, the first rounds and the final round (where audits used to be drawn
    from) and idle in the other ~180 timed rounds: the checked rounds are a reservoir sample of all of them."""
    v = verify(RELU, (CANDS / "unchecked_tail_rounds.py").read_text(), backend="cpu", config=TAIL_CFG)
    assert v.status == "incorrect" and "re-check after timing" in _text(v), _text(v)
    assert v.reward == -1.0


@pytest.mark.slow
def test_a_fallback_in_the_unwatched_rounds_meets_a_late_audit(monkeypatch):
    """Honest where audits used to be drawn and in the final round, PyTorch (through a helper the static analysis
    cannot follow) in the ~180 rounds after: its outputs are right, so only a profiled round can tell, and after the
    first rounds each round may be one. (The source rules now reject how it attaches the helper, `ModelNew.helper =
    …`; they are switched off here to show the late audits.)"""
    _static_rules_off(monkeypatch)
    v = verify(RELU, (CANDS / "late_fallback.py").read_text(), backend="cpu", config=TAIL_CFG)
    assert v.status == "illegal" and "aten::relu" in _text(v), _text(v)


@pytest.mark.slow
def test_files_outside_workdir_are_not_written():
    for p in ("/tmp/musacoder_pwned.txt", "/tmp/musacoder_pwned_native.txt"):
        assert not Path(p).exists()


@pytest.mark.slow
def test_pool_goes_on_after_crash_and_hang():
    """A crash and a hang in the same batch do not affect the legitimate verdict that follows them."""
    from musacoder.judge.batch import VerifyJob, verify_many
    from musacoder.tasks import load_task

    task = load_task(RELU)
    jobs = [VerifyJob(n, task, (CANDS / f"{n}.py").read_text(), "cpu") for n in ("crash", "hang", "legit_relu")]
    got = {job.id: v.status for job, v in verify_many(jobs, workers=2, config=CFG)}
    assert got == {"crash": "crashed", "hang": "timeout", "legit_relu": "ok"}


@pytest.mark.slow
def test_legit_relu_accepted():
    v = verify(RELU, (CANDS / "legit_relu.py").read_text(), backend="cpu", config=CFG)
    assert v.status == "ok", _text(v)
    assert v.correct and v.legal and v.compiled and v.pass_fraction == 1.0
    assert v.speedup is not None and v.speedup > 0
    assert v.reward >= 1.0


@pytest.mark.slow
@pytest.mark.skipif(not SOFTMAX.exists(), reason="kernelbench-small not found (set KERNELBENCH_SMALL_DIR)")
def test_zeros_fail_tiny_output_task_but_real_softmax_passes():
    bad = verify(SOFTMAX, (CANDS / "zeros_for_tiny_output.py").read_text(), backend="cpu", config=CFG,
                 overrides={"batch_size": 4})
    assert bad.status == "incorrect", _text(bad)
    assert "relative L2" in _text(bad)
    good = verify(SOFTMAX, (CANDS / "legit_softmax.py").read_text(), backend="cpu",
                  config=CFG.model_copy(update={"time_candidate": False}), overrides={"batch_size": 4})
    assert good.status == "ok", _text(good)


@pytest.mark.slow
@pytest.mark.skipif(not RELU_RAND.exists(), reason="kernelbench-small not found (set KERNELBENCH_SMALL_DIR)")
def test_a_kernel_idle_on_the_tasks_own_inputs_is_timed_on_inputs_checked_as_strictly_as_any():
    """19_ReLU draws x from torch.rand, where ReLU is the identity. The candidate probes 97 elements with its own
    kernel and returns x unchanged when none is negative: every trial passes (the identity is right on the task's
    own inputs, and it runs its kernel on the scaled-negative, zero-mean and sliced ones). Timed on the task's own
    inputs (`timing_inputs="task"`, KernelBench's choice) it idles, at 124x before the default changed; timed on
    zero-mean inputs (the default) it has to run its kernel, and earns what that kernel earns."""
    code = (CANDS / "distribution_gated_identity.py").read_text()
    cfg = CFG.model_copy(update={"outlier_speedup": 1e6, "clean_reference": False})
    on_task = verify(RELU_RAND, code, backend="cpu", config=cfg.model_copy(update={"timing_inputs": "task"}))
    centred = verify(RELU_RAND, code, backend="cpu", config=cfg)
    assert on_task.status == "ok" and centred.status == "ok", (_text(on_task), _text(centred))
    assert on_task.speedup > 5 * centred.speedup, (on_task.speedup, centred.speedup)


@pytest.mark.skipif(not RELU_RAND.exists(), reason="kernelbench-small not found (set KERNELBENCH_SMALL_DIR)")
def test_a_kernel_writing_into_its_inputs_earns_no_partial_credit():
    """An in-place ReLU on 19_ReLU, whose own inputs are non-negative: there the write changes nothing and the trials
    pass; the zero-mean ones see the inputs changed. It earned −0.14 on the H100 (two of seven trials failed); a
    change to the inputs is found bit for bit, never noise, so q counts as 0 and the defect is named."""
    v = verify(RELU_RAND, (CANDS / "input_mutation.py").read_text(), backend="cpu",
               config=CFG.model_copy(update={"time_candidate": False}))
    assert v.status == "incorrect" and v.reward == -1.0, _text(v)
    assert any(t.passed for t in v.trials) and any(not t.passed for t in v.trials), _text(v)
    assert v.systematic_defect and "writes into its inputs" in v.systematic_defect, _text(v)


@pytest.mark.slow
def test_hardcoded_shape_caught_by_extra_shapes():
    code = (CANDS / "hardcoded_batch.py").read_text()
    plain = verify(RELU, code, backend="cpu", config=CFG.model_copy(update={"time_candidate": False}))
    assert plain.status == "ok"  # at the task's own size the hack passes ...
    cfg = CFG.model_copy(update={"time_candidate": False, "extra_shapes": [{"batch_size": 96}]})
    v = verify(RELU, code, backend="cpu", config=cfg)
    assert v.status == "incorrect" and "at extra shape" in _text(v), _text(v)  # ... but not at another
    good = verify(RELU, (CANDS / "legit_relu.py").read_text(), backend="cpu", config=cfg)
    assert good.status == "ok", _text(good)


@pytest.mark.slow
def test_a_reference_slowed_in_the_candidates_process_earns_nothing(monkeypatch):
    """With the static rules switched off here (they reject this candidate outright), a candidate that patches the
    reference's `torch.relu` with a 3 ms sleep in its own process. Its speedup was tens without the clean reference
    worker and 0.07x with it (docs/threats.md, row 23); since the sixth round the worker sees the patch itself, as
    importing the candidate changed `torch.relu`."""
    _static_rules_off(monkeypatch)
    code = (CANDS / "reference_slowed_in_process.py").read_text()
    cfg = CFG.model_copy(update={"outlier_speedup": 1e6})
    v = verify(RELU, code, backend="cpu", config=cfg)
    assert v.status == "illegal" and "torch.relu" in _text(v), _text(v)


@pytest.mark.slow
def test_a_dispatcher_registration_made_in_a_middle_trial_is_seen(monkeypatch):
    """The dispatcher's digest (the costly part of the global-state check) runs after a worker's first and last
    correctness trials; a kernel registered in a middle one and kept is seen at the last."""
    _static_rules_off(monkeypatch)
    v = verify(RELU, (CANDS / "dispatcher_registered_mid_trials.py").read_text(), backend="cpu", config=CFG)
    assert v.status == "illegal" and "dispatcher for aten::sin" in _text(v), _text(v)


@pytest.mark.slow
def test_global_state_changed_only_while_timed_is_illegal(monkeypatch):
    """Honest through the correctness trials, then it lowers fp32 matmul precision in its process from the first
    timing round on (the static rules, which reject the call outright, switched off here). The timing's audited
    rounds leave the global-state check to one read after the last round, with the device shared again; that read
    must see it."""
    _static_rules_off(monkeypatch)
    v = verify(RELU, (CANDS / "global_state_changed_while_timed.py").read_text(), backend="cpu", config=CFG)
    assert v.status == "illegal" and "while timed: float32 matmul precision changed" in _text(v), _text(v)
    assert v.stages.get("correctness") == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("tau", [1.0, 1.25])
def test_an_honest_speedup_counts_the_reference_beside_it_at_most_tau_times_the_clean_figure(tau):
    """The reference is timed beside the candidate and again in a fresh reference-only worker; the one beside it
    counts at most τ times the clean figure (τ = 1: the lower of the two), and both are reported."""
    cfg = CFG.model_copy(update={"clean_reference_tolerance": tau})
    v = verify(RELU, (REPO / "examples" / "candidates" / "relu_cpu.py").read_text(), backend="cpu", config=cfg)
    assert v.status == "ok", _text(v)
    assert v.ref_runtime_ms_clean is not None and v.ref_runtime_ms_in_process is not None
    assert v.ref_runtime_ms == pytest.approx(min(tau * v.ref_runtime_ms_clean, v.ref_runtime_ms_in_process))
    assert v.speedup == pytest.approx(v.ref_runtime_ms / v.runtime_ms)


def _foreign_blas_candidate() -> str:
    """NumPy's bundled OpenBLAS linked by file and called under its prefixed CBLAS name (`scipy_cblas_sgemm64_`),
    its thread count set through token pasting (0.53x against an honest naive loop's 0.20x, `ok` before the fifth
    round). Written here because the library's file name changes with NumPy's release."""
    import numpy

    libs = sorted((Path(numpy.__file__).parent.parent / "numpy.libs").glob("libscipy_openblas64_*.so"))
    if not libs:
        pytest.skip("this NumPy bundles no scipy-openblas64 library")
    lib = libs[0]
    return f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <cstdint>
#define JOIN(a, b) a##b
extern "C" void JOIN(scipy_openblas_set_num, _threads64_)(int);
extern "C" void scipy_cblas_sgemm64_(int, int, int, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                     const float*, int64_t, float, float*, int64_t);
torch::Tensor mm_fwd(torch::Tensor A, torch::Tensor B) {{
    JOIN(scipy_openblas_set_num, _threads64_)(1);
    auto a = A.contiguous(), b = B.contiguous();
    const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
    auto C = torch::empty({{n, m}}, a.options());
    scipy_cblas_sgemm64_(101, 111, 111, n, m, k, 1.0f, a.data_ptr<float>(), k, b.data_ptr<float>(), m, 0.0f,
                         C.data_ptr<float>(), m);
    return C;
}}
"""
kit = load_inline(name="foreign_blas", cpp_sources=src, functions=["mm_fwd"], extra_cflags=["-O2"],
                  extra_ldflags=["-L{lib.parent}", "-l:{lib.name}", "-Wl,-rpath,{lib.parent}"])


class ModelNew(nn.Module):
    def forward(self, A, B):
        return kit.mm_fwd(A, B)
'''


def test_a_foreign_library_linked_by_file_is_rejected_by_the_source_rules():
    v = verify(MATMUL, _foreign_blas_candidate(), backend="cpu", config=CFG)
    assert v.status == "illegal" and "the link flag '-L" in _text(v), _text(v)
    assert "linking vendor libraries (-l:libscipy_openblas64_" in _text(v), _text(v)


@pytest.mark.slow
def test_the_binary_rule_alone_rejects_the_fifth_round(monkeypatch):
    """Defence in depth: with the source rules switched off here, the built libraries' imports reject each hack of
    the fifth red-team round: a registry setter (c10::SetCPUAllocator), the interpreter reached from native code
    (PySys_GetObject …), and a library loaded that is not a runtime's or PyTorch's."""
    _static_rules_off(monkeypatch)
    cfg = CFG.model_copy(update={"time_candidate": False})
    for name, task, phrase in (("lazy_allocator", RELU, "process-wide registry of PyTorch"),
                               ("interpreter_clock", RELU, "reaches into the Python interpreter"),
                               ("profiler_switch", MATMUL, "reaches into the Python interpreter")):
        v = verify(task, (CANDS / f"{name}.py").read_text(), backend="cpu", config=cfg)
        assert v.status == "illegal" and phrase in _text(v), (name, _text(v))
    v = verify(MATMUL, _foreign_blas_candidate(), backend="cpu", config=cfg)
    assert v.status == "illegal" and "loads the library libscipy_openblas64_" in _text(v), _text(v)
    v = verify(RELU, (CANDS / "open_openmp_region.py").read_text(), backend="cpu", config=cfg)  # eighth round
    assert v.status == "illegal" and "GOMP_parallel_start" in _text(v), _text(v)


@pytest.mark.slow
def test_an_allocator_or_a_patched_clock_is_seen_at_run_time_without_the_source_and_binary_rules(monkeypatch):
    """Defence in depth: with the source and binary rules switched off here, the worker sees the CPU allocator
    replaced (its address compared before and after candidate code) and its own timing module changed (the
    verifier's functions compared by identity)."""
    _static_rules_off(monkeypatch)
    _binary_rule_off(monkeypatch)
    v = verify(RELU, (CANDS / "lazy_allocator.py").read_text(), backend="cpu", config=CFG)
    assert v.status == "illegal" and "CPU allocator was replaced" in _text(v), _text(v)
    v = verify(RELU, (CANDS / "interpreter_clock.py").read_text(), backend="cpu", config=CFG)
    assert v.status == "illegal" and "musacoder.judge.timing._perf_ns" in _text(v), _text(v)


@pytest.mark.slow
def test_a_patched_tensor_method_is_seen_at_run_time_without_the_source_rules(monkeypatch):
    """Defence in depth: with the source rules switched off here (the binary rule passes both: they use only what
    pybind11's glue imports, or no native code at all), the worker sees `torch.Tensor.untyped_storage` and
    `torch.Tensor.detach` replaced: it compares what the harness runs before and after candidate code, and as each
    candidate call returns."""
    _static_rules_off(monkeypatch)
    v = verify(RELU, (CANDS / "layout_probe.py").read_text(), backend="cpu", config=CFG)
    assert v.status == "illegal" and "torch.Tensor.untyped_storage" in _text(v), _text(v)
    v = verify(MATMUL, (CANDS / "alias_patch_detach.py").read_text(), backend="cpu", config=CFG)
    assert v.status == "illegal" and "torch.Tensor.detach" in _text(v), _text(v)


@pytest.mark.slow
def test_a_thread_started_at_import_is_seen_by_the_binary_rule_and_at_run_time(monkeypatch):
    """Defence in depth for `background_thread_at_import`: with the source rules off, the binary rule sees the
    extension start a std::thread; with the binary rule off too, the worker sees a thread started while importing
    the candidate (no call's thread count would: it existed before the first one)."""
    _static_rules_off(monkeypatch)
    cfg = CFG.model_copy(update={"time_candidate": False})
    code = (CANDS / "background_thread_at_import.py").read_text()
    v = verify(RELU, code, backend="cpu", config=cfg)
    assert v.status == "illegal" and "std::thread::_M_start_thread" in _text(v), _text(v)
    _binary_rule_off(monkeypatch)
    v = verify(RELU, code, backend="cpu", config=cfg)
    assert v.status == "illegal" and "importing the candidate started 1 thread" in _text(v), _text(v)


FORGED_REPLY = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <unistd.h>

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

// writes `message` (hex) to every descriptor the worker has open: one of them is its reply pipe
void post(const std::string& hex) {
    std::string bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back((char)std::stoi(hex.substr(i, 2), nullptr, 16));
    for (int fd = 3; fd < 256; ++fd) {
        if (write(fd, bytes.data(), bytes.size()) < 0) {}
    }
}
"""

ext = load_inline(name="forged_reply", cpp_sources=src, functions=["relu_fwd", "post"])
MESSAGE = "%s"


class ModelNew(nn.Module):
    def forward(self, x):
        ext.post(MESSAGE)
        return ext.relu_fwd(x)
'''


def _framed(msg: dict) -> str:
    """`msg` as the worker's protocol frames it (what the candidate's native code writes ahead of the harness)."""
    from musacoder.judge import protocol

    r, w = os.pipe()
    try:
        protocol.send(w, msg)
        os.close(w)
        data = b""
        while chunk := os.read(r, 1 << 16):
            data += chunk
    finally:
        os.close(r)
    return data.hex()


@pytest.mark.slow
def test_a_reply_forged_by_native_code_is_not_taken():
    """A wrong candidate would rather end as `infra_error` (no reward) than `incorrect` (-1): its kernel writes a
    well-formed `infra_error` reply to every descriptor of its worker, ahead of the harness's reply. Every request
    carries a fresh key that its replies must echo (`protocol.REPLY_KEY`); the forged message lacks it, so the
    verification ends as `crashed`, which is charged."""
    forged = {"ok": False, "kind": "infra_error", "error": "the verifier's own fault", "where": "trial", "oom": False}
    cfg = CFG.model_copy(update={"time_candidate": False})
    v = verify(RELU, FORGED_REPLY % _framed(forged), backend="cpu", config=cfg)
    assert v.status == "crashed" and "without its request's key" in _text(v), _text(v)
    assert v.reward == -1.0
