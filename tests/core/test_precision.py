"""The precision rule (musacoder.judge.compare) and the structured trials (musacoder.judge.inputs).

Pure checks on tensors first (fast), then end to end on the CPU with C++ candidates that share one extension: an
fp32 GEMM, the same GEMM on operands rounded to fp16/TF32 (10-bit mantissa) or bf16 (7-bit), and a mean that reads
only the first tenth of its input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from musacoder.judge.compare import Yardstick, compare_tensor, rel_error, round_mantissa
from musacoder.judge.inputs import make_inputs


def _sequential_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp32 accumulation along K one term at a time (a one-thread-per-output kernel's summation order)."""
    prod = a.numpy()[:, None, :] * b.numpy().T[None, :, :]
    return torch.from_numpy(np.cumsum(prod.astype(np.float32), axis=2, dtype=np.float32)[..., -1])


def _yardstick(a, b) -> Yardstick:
    ref64 = a.double() @ b.double()
    low = round_mantissa(a) @ round_mantissa(b)
    return Yardstick(ref64, rel_error(a @ b, ref64), rel_error(low, ref64))


def _judge(out, a, b):
    return compare_tensor(a @ b, out, yardstick=_yardstick(a, b))


@pytest.mark.parametrize("k", [64, 4096])
def test_on_zero_mean_inputs_reduced_precision_fails_and_any_fp32_summation_order_passes(k):
    g = torch.Generator().manual_seed(k)
    a = torch.rand(32, k, generator=g) - 0.5
    b = torch.rand(k, 32, generator=g) - 0.5
    ys = _yardstick(a, b)
    assert ys.has_power  # rounding the operands costs hundreds of times fp32's error here
    assert _judge(_sequential_matmul(a, b), a, b).passed
    for name, (x, y) in {"fp16": (a.half().float(), b.half().float()),
                         "tf32": (round_mantissa(a), round_mantissa(b)),
                         "bf16": (a.bfloat16().float(), b.bfloat16().float())}.items():
        assert not _judge(x @ y, a, b).passed, name
        # the rule alone rejects it, by a wide margin (the elementwise tolerance often does too, not always)
        assert rel_error(x @ y, ys.ref64) > 2 * ys.bound(torch.float32), name


def test_a_trial_without_power_does_not_apply_the_rule():
    """Positive inputs and a very long sum: rounding the operands costs no more than fp32 accumulation, so the rule
    cannot tell them apart and stays out of the way of an honest sequential kernel (the zero-mean trials judge it)."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(4, 1 << 17, generator=g), torch.rand(1 << 17, 4, generator=g)
    ys = _yardstick(a, b)
    assert not ys.has_power
    c = compare_tensor(a @ b, _sequential_matmul(a, b), yardstick=ys)
    assert c.passed and c.precision_error is None


def test_structured_inputs_are_zero_mean_and_one_offset_slice_is_reproducible():
    class Task:
        @staticmethod
        def get_inputs():
            return [torch.rand(64, 256), torch.randint(0, 4, (8,))]

    centred, ints = make_inputs(Task, 5, perturb="center")
    assert abs(float(centred.mean())) < 1e-6 and ints.dtype == torch.int64  # integers are left alone
    sliced, _ = make_inputs(Task, 5, perturb="slice")
    again, _ = make_inputs(Task, 5, perturb="slice")
    assert torch.equal(sliced, again)
    hot = (sliced - centred).reshape(-1) > 1.0
    assert int(hot.sum()) == sliced.numel() // 16  # one contiguous run of n/16 elements carries the offset
    idx = hot.nonzero().reshape(-1)
    assert int(idx[-1] - idx[0]) + 1 == idx.numel()
    with pytest.raises(ValueError, match="unknown perturbation"):
        make_inputs(Task, 5, perturb="sideways")


EXT = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cstring>

static float keep_bits(float v, int bits) {  // round to nearest at `bits` explicit mantissa bits
    if (bits >= 23) return v;
    uint32_t u; std::memcpy(&u, &v, 4);
    const int drop = 23 - bits;
    u = (u + (1u << (drop - 1))) & ~((1u << drop) - 1u);
    std::memcpy(&v, &u, 4);
    return v;
}

torch::Tensor gemm(torch::Tensor a, torch::Tensor b, int64_t bits) {
    auto A = a.contiguous(); auto B = b.contiguous();
    const int64_t M = A.size(0), K = A.size(1), N = B.size(1);
    auto C = torch::empty({M, N}, A.options());
    const float* pa = A.data_ptr<float>(); const float* pb = B.data_ptr<float>(); float* pc = C.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            float acc = 0.f;
            for (int64_t k = 0; k < K; ++k) acc += keep_bits(pa[i * K + k], bits) * keep_bits(pb[k * N + j], bits);
            pc[i * N + j] = acc;
        }
    return C;
}

torch::Tensor mean_of_part(torch::Tensor x, double fraction) {
    auto X = x.contiguous();
    const int64_t n = X.numel(), m = std::max<int64_t>(1, (int64_t)(n * fraction));
    const float* p = X.data_ptr<float>();
    double s = 0.0;
    for (int64_t i = 0; i < m; ++i) s += p[i];
    auto out = torch::empty({}, X.options());
    out.data_ptr<float>()[0] = (float)(s / m);
    return out;
}

torch::Tensor mean_with_a_data_dependent_bug(torch::Tensor x) {  // wrong only when the first value is in (0.5, 0.95)
    auto X = x.contiguous();
    const int64_t n = X.numel();
    const float* p = X.data_ptr<float>();
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += p[i];
    auto out = torch::empty({}, X.options());
    out.data_ptr<float>()[0] = (float)(s / n) + ((p[0] > 0.5f && p[0] < 0.95f) ? 0.5f : 0.f);
    return out;
}
"""

ext = load_inline(name="precision_probe", cpp_sources=cpp_source,
                  functions=["gemm", "mean_of_part", "mean_with_a_data_dependent_bug"],
                  extra_cflags=["-O2"])
'''

GEMM_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.rand(48, 1024), torch.rand(1024, 40)]


def get_init_inputs():
    return []
'''

MEAN_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(x)


def get_inputs():
    return [torch.rand(256, 1024)]


def get_init_inputs():
    return []
'''


def _gemm_candidate(bits: int) -> str:
    return EXT + f'''

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return ext.gemm(a, b, {bits})
'''


@pytest.mark.slow
@pytest.mark.parametrize("bits,accepted", [(23, True), (10, False), (7, False)], ids=["fp32", "fp16-tf32", "bf16"])
def test_reduced_precision_gemm_is_rejected_end_to_end(tmp_path, bits, accepted):
    from musacoder import verify
    from musacoder.config import VerifyConfig

    task = tmp_path / "gemm.py"
    task.write_text(GEMM_TASK)
    v = verify(task, _gemm_candidate(bits), backend="cpu", config=VerifyConfig(time_candidate=False))
    if accepted:
        assert v.status == "ok", (v.error, [t.message for t in v.trials])
        assert any(t.precision_bound for t in v.trials)  # the rule applied, and the honest kernel met it
    else:
        assert v.status == "incorrect" and v.reward == -1.0  # a systematic cut: no partial credit
        failed = [t for t in v.trials if not t.passed]
        assert failed and all("float64 reference" in t.message or "outside atol" in t.message for t in failed)
        assert v.systematic_defect and v.systematic_defect in v.feedback, (v.systematic_defect, v.feedback)
        assert 0 < v.pass_fraction < 1 or v.pass_fraction == 0


def _verify_mean(tmp_path, call: str):
    """The mean task verified (untimed, a fixed seed) with a ModelNew whose forward returns `call`."""
    from musacoder import verify
    from musacoder.config import VerifyConfig

    task = tmp_path / "mean.py"
    task.write_text(MEAN_TASK)
    cand = EXT + f"""

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {call}
"""
    return verify(task, cand, backend="cpu", config=VerifyConfig(time_candidate=False, seed=3))


@pytest.mark.slow
def test_a_partial_reduction_fails_the_structured_trials(tmp_path):
    v = _verify_mean(tmp_path, "ext.mean_of_part(x, 0.1)")
    assert v.status == "incorrect"
    assert len(v.trials) == 7 and sum(not t.passed for t in v.trials) >= 2  # at least the two structured trials
    assert v.reward == -1.0 and v.systematic_defect and "Systematic defect" in v.feedback


@pytest.mark.slow
def test_a_data_dependent_bug_keeps_the_papers_partial_credit(tmp_path):
    """Partial credit stays for failures that vary between trials of the same kind: this mean is wrong only when its
    first input value falls in a window the task's own inputs reach and the structured ones never do."""
    v = _verify_mean(tmp_path, "ext.mean_with_a_data_dependent_bug(x)")
    assert v.status == "incorrect" and v.systematic_defect is None, (v.systematic_defect, [t.kind for t in v.trials])
    assert 0 < v.pass_fraction < 1
    assert v.reward == pytest.approx(-0.5 + 0.5 * v.pass_fraction) and v.reward > -1


def test_where_results_cancel_an_element_may_be_off_by_the_arithmetics_own_error_scale():
    """Prefix sums of zero-mean inputs cross zero: an honest sequential fp32 scan is off by far more than
    atol + rtol·|ref| there (its error scales with the terms summed) and by 129× torch's CPU scan. The slack (an
    eighth of what half-precision rounding of the operands moves an element) lets it pass; a scan on operands rounded
    to a 10-bit mantissa still fails, and so does one element off by the order of the result."""
    g = torch.Generator().manual_seed(1)
    x = torch.rand(16, 32768, generator=g) - 0.5
    ref32, ref64 = torch.cumsum(x, 1), torch.cumsum(x.double(), 1)
    low = torch.cumsum(round_mantissa(x), 1)
    from musacoder.judge.compare import max_abs_error

    ys = Yardstick(ref64, rel_error(ref32, ref64), rel_error(low, ref64), max_abs_error(ref32, ref64),
                   max_abs_error(low, ref64))
    honest = torch.from_numpy(np.cumsum(x.numpy(), axis=1, dtype=np.float32))
    assert not compare_tensor(ref32, honest).passed  # the plain elementwise bound alone rejects an honest scan
    assert compare_tensor(ref32, honest, yardstick=ys).passed
    assert not compare_tensor(ref32, low, yardstick=ys).passed
    skipped = honest.clone()
    skipped[3, 20000] += float(ref64[3].abs().mean())  # one element off by the order of the result
    assert not compare_tensor(ref32, skipped, yardstick=ys).passed
