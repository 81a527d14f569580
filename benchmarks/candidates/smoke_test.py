"""GPU smoke test for the CUDA candidates, with references written independently of the KernelBench files.

For every candidate under ``cuda/level*/``: build it (builds run in parallel worker processes first, so the
main process only loads cached extensions), construct ``ModelNew`` with a few init-argument variants, run it
on small inputs of awkward sizes (not multiples of the tile sizes), and compare against a reference written
here with plain PyTorch ops: ``allclose(atol=rtol=1e-4)`` and relative L2 error < 1e-2. Inputs are
``randn``-scaled so negative values, ties-free reductions and threshold branches are exercised.

``--harness`` additionally writes two tiny problem files (authored here, KernelBench-format) into a temp dir
and runs ``benchmarks/kernelbench_style_baseline.py`` on them end to end.

Usage (needs a GPU):  python benchmarks/candidates/smoke_test.py [--jobs 8] [--only GLOB] [--json OUT] [--harness]
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import fnmatch
import glob
import json
import math
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def _build(path: str) -> tuple[str, float, str | None]:
    t = time.time()
    try:
        exec(compile(open(path).read(), path, "exec"), {"__name__": "kbc_build"})
        return path, time.time() - t, None
    except Exception as e:
        return path, time.time() - t, f"{type(e).__name__}: {str(e)[-3000:]}"


def specs():
    import torch
    import torch.nn.functional as F

    def rn(*s, scale=3.0):
        return torch.randn(*s, device="cuda") * scale

    def ru(*s):
        return torch.rand(*s, device="cuda")

    def lin(m, x):
        return x @ m.weight.t() + (m.bias if m.bias is not None else 0)

    gelu = lambda v: 0.5 * v * (1 + torch.erf(v / math.sqrt(2)))
    mish = lambda v: v * torch.tanh(F.softplus(v))
    ew_in = lambda: [[rn(33, 1003)], [rn(4, 256)], [rn(1, 7)]]
    S = {}
    # ---- level 1: matmuls
    mm = lambda m, a, b: a @ b
    S["level1/1_Square_matrix_multiplication_.py"] = ([()], lambda: [[ru(300, 300), ru(300, 300)], [ru(129, 129), ru(129, 129)]], mm)
    S["level1/2_Standard_matrix_multiplication_.py"] = ([()], lambda: [[ru(130, 270), ru(270, 190)], [ru(256, 512), ru(512, 128)]], mm)
    S["level1/3_Batched_matrix_multiplication.py"] = ([()], lambda: [[ru(3, 70, 90), ru(3, 90, 130)]], lambda m, a, b: torch.bmm(a, b))
    S["level1/4_Matrix_vector_multiplication_.py"] = ([()], lambda: [[ru(37, 4096), ru(4096, 1)], [ru(5, 1001), ru(1001, 1)]], mm)
    S["level1/5_Matrix_scalar_multiplication.py"] = ([()], lambda: [[ru(100, 77), 3.14], [ru(64, 64), -0.5]], lambda m, a, s: a * s)
    S["level1/6_Matmul_with_large_K_dimension_.py"] = ([()], lambda: [[ru(64, 70000), ru(70000, 96)], [ru(130, 1000), ru(1000, 3)]], mm)
    S["level1/8_Matmul_with_irregular_shapes_.py"] = ([()], lambda: [[ru(205, 149), ru(149, 321)]], mm)
    S["level1/9_Tall_skinny_matrix_multiplication_.py"] = ([()], lambda: [[ru(500, 16), ru(16, 500)], [ru(300, 32), ru(32, 300)]], mm)
    S["level1/12_Matmul_with_diagonal_matrices_.py"] = ([()], lambda: [[ru(200), ru(200, 150)]], lambda m, a, b: torch.diag(a) @ b)
    def sym(n):
        a = ru(n, n)
        return (a + a.T) / 2
    S["level1/13_Matmul_for_symmetric_matrices.py"] = ([()], lambda: [[sym(300), sym(300)]], mm)
    S["level1/16_Matmul_with_transposed_A.py"] = ([()], lambda: [[ru(200, 130), ru(200, 170)]], lambda m, a, b: a.T @ b)
    S["level1/17_Matmul_with_transposed_B.py"] = ([()], lambda: [[ru(130, 200), ru(170, 200)]], lambda m, a, b: a @ b.T)
    S["level1/18_Matmul_with_transposed_both.py"] = ([()], lambda: [[ru(200, 130), ru(170, 200)]], lambda m, a, b: a.T @ b.T)
    # ---- level 1: activations
    S["level1/19_ReLU.py"] = ([()], ew_in, lambda m, x: torch.relu(x))
    S["level1/20_LeakyReLU.py"] = ([(), (0.2,)], ew_in, lambda m, x: F.leaky_relu(x, m.negative_slope))
    S["level1/21_Sigmoid.py"] = ([()], ew_in, lambda m, x: torch.sigmoid(x))
    S["level1/22_Tanh.py"] = ([()], ew_in, lambda m, x: torch.tanh(x))
    S["level1/25_Swish.py"] = ([()], ew_in, lambda m, x: x * torch.sigmoid(x))
    S["level1/26_GELU_.py"] = ([()], ew_in, lambda m, x: F.gelu(x))
    S["level1/27_SELU_.py"] = ([()], ew_in, lambda m, x: torch.selu(x))
    S["level1/28_HardSigmoid.py"] = ([()], ew_in, lambda m, x: F.hardsigmoid(x))
    S["level1/29_Softplus.py"] = ([()], lambda: [[rn(33, 1003, scale=10.0)]], lambda m, x: F.softplus(x))
    S["level1/30_Softsign.py"] = ([()], ew_in, lambda m, x: x / (1 + x.abs()))
    S["level1/31_ELU.py"] = ([(1.0,), (0.5,)], ew_in, lambda m, x: F.elu(x, m.alpha))
    S["level1/32_HardTanh.py"] = ([()], ew_in, lambda m, x: F.hardtanh(x, -1.0, 1.0))
    S["level1/88_MinGPTNewGelu.py"] = ([()], ew_in, lambda m, x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0)))))
    S["level1/23_Softmax.py"] = ([()], lambda: [[rn(8, 5000)], [rn(4, 1003)], [ru(3, 100000)]], lambda m, x: torch.softmax(x, 1))
    S["level1/24_LogSoftmax.py"] = ([(), (1,)], lambda: [[rn(8, 5000)], [rn(4, 1003)]], lambda m, x: torch.log_softmax(x, 1))
    # ---- level 1: norms
    def rand_affine(mod):
        with torch.no_grad():
            for p in mod.parameters():
                p.copy_(torch.randn_like(p))
    def bn_ref(m, x):
        return F.batch_norm(x, None, None, m.bn.weight, m.bn.bias, training=True, eps=m.bn.eps)
    S["level1/33_BatchNorm.py"] = ([(8,)], lambda: [[rn(4, 8, 17, 19) + 1.0]], bn_ref, rand_affine)
    S["level1/34_InstanceNorm.py"] = ([(5,)], lambda: [[rn(3, 5, 33, 31) + 0.5]], lambda m, x: F.instance_norm(x, eps=1e-5))
    S["level1/35_GroupNorm_.py"] = ([(8, 4), (8, 2)], lambda: [[rn(3, 8, 17, 9)], [rn(2, 8, 40, 41)]],
                                    lambda m, x: F.group_norm(x, m.gn.num_groups, m.gn.weight, m.gn.bias, m.gn.eps), rand_affine)
    S["level1/36_RMSNorm_.py"] = ([(8,)], lambda: [[rn(3, 8, 17, 9)]],
                                  lambda m, x: x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5))
    S["level1/37_FrobeniusNorm_.py"] = ([()], lambda: [[rn(3, 8, 17, 9)], [ru(64, 1000, 33)]], lambda m, x: x / torch.norm(x, p="fro"))
    S["level1/38_L1Norm_.py"] = ([()], lambda: [[rn(7, 1001)]], lambda m, x: x / torch.mean(torch.abs(x), dim=1, keepdim=True))
    S["level1/39_L2Norm_.py"] = ([()], lambda: [[rn(7, 1001)]], lambda m, x: x / torch.norm(x, p=2, dim=1, keepdim=True))
    S["level1/40_LayerNorm.py"] = ([((8, 17, 9),)], lambda: [[rn(3, 8, 17, 9) + 2.0]],
                                   lambda m, x: F.layer_norm(x, m.ln.normalized_shape, m.ln.weight, m.ln.bias, m.ln.eps), rand_affine)
    # ---- level 1: reductions over a dim (dims 1, 2 (inner == 1 path), 0)
    red_in = lambda: [[rn(5, 70, 45)], [rn(3, 40, 7)]]
    dims = [(1,), (2,), (0,), (-1,)]
    S["level1/47_Sum_reduction_over_a_dimension.py"] = (dims, red_in, lambda m, x: torch.sum(x, dim=m.dim, keepdim=True))
    S["level1/48_Mean_reduction_over_a_dimension.py"] = (dims, red_in, lambda m, x: torch.mean(x, dim=m.dim))
    S["level1/49_Max_reduction_over_a_dimension.py"] = (dims, red_in, lambda m, x: torch.max(x, dim=m.dim)[0])
    S["level1/53_Min_reduction_over_a_dimension.py"] = (dims, red_in, lambda m, x: torch.min(x, dim=m.dim)[0])
    S["level1/51_Argmax_over_a_dimension.py"] = (dims, red_in, lambda m, x: torch.argmax(x, dim=m.dim))
    S["level1/52_Argmin_over_a_dimension.py"] = (dims, red_in, lambda m, x: torch.argmin(x, dim=m.dim))
    S["level1/89_cumsum.py"] = ([(1,)], lambda: [[ru(5, 3001)], [rn(3, 1024)], [ru(2, 5)]], lambda m, x: torch.cumsum(x, dim=m.dim))
    S["level1/94_MSELoss.py"] = ([()], lambda: [[ru(64, 1000) * 0.3, ru(64, 1000)]], lambda m, p, t: torch.mean((p - t) ** 2))
    S["level1/100_HingeLoss.py"] = ([()], lambda: [[ru(64, 1000), torch.randint(0, 2, (1000,), device="cuda").float() * 2 - 1]],
                                    lambda m, p, t: torch.mean(torch.clamp(1 - p * t, min=0)))
    # ---- level 2: Linear + epilogues
    x2 = lambda: [[ru(70, 300)], [ru(129, 256)]]
    S["level2/9_Matmul_Subtract_Multiply_ReLU.py"] = ([(300, 130, 2.0, 1.5)], lambda: [[ru(70, 300)], [ru(129, 300)]],
        lambda m, x: torch.relu((lin(m.linear, x) - m.subtract_value) * m.multiply_value))
    S["level2/12_Gemm_Multiply_LeakyReLU.py"] = ([(300, 130, 2.0, 0.1)], lambda: [[ru(70, 300)]],
        lambda m, x: F.leaky_relu(lin(m.gemm, x) * m.multiplier, 0.1))
    S["level2/29_Matmul_Mish_Mish.py"] = ([(300, 130)], lambda: [[rn(70, 300)]], lambda m, x: mish(mish(lin(m.linear, x))))
    S["level2/40_Matmul_Scaling_ResidualAdd.py"] = ([(300, 130, 0.5)], lambda: [[ru(70, 300)]],
        lambda m, x: lin(m.matmul, x) * m.scaling_factor + lin(m.matmul, x))
    S["level2/53_Gemm_Scaling_Hardtanh_GELU.py"] = ([(300, 130, 0.5, -2, 2)], lambda: [[rn(70, 300)]],
        lambda m, x: F.gelu(F.hardtanh(lin(m.gemm, x) * 0.5, -2, 2)))
    S["level2/56_Matmul_Sigmoid_Sum.py"] = ([(300, 1030)], lambda: [[ru(70, 300)]],
        lambda m, x: torch.sigmoid(lin(m.linear, x)).sum(dim=1, keepdim=True))
    S["level2/59_Matmul_Swish_Scaling.py"] = ([(300, 130, 2.0)], lambda: [[ru(70, 300)]],
        lambda m, x: lin(m.matmul, x) * torch.sigmoid(lin(m.matmul, x)) * 2.0)
    S["level2/63_Gemm_ReLU_Divide.py"] = ([(300, 130, 2.0)], lambda: [[ru(70, 300)]], lambda m, x: torch.relu(lin(m.linear, x)) / 2.0)
    S["level2/68_Matmul_Min_Subtract.py"] = ([(300, 130, 0.2)], lambda: [[ru(70, 300)]],
        lambda m, x: torch.min(lin(m.linear, x), m.constant) - m.constant)
    S["level2/70_Gemm_Sigmoid_Scaling_ResidualAdd.py"] = ([(300, 130, 2.0)], lambda: [[ru(70, 300)]],
        lambda m, x: torch.sigmoid(lin(m.gemm, x)) * 2.0 + lin(m.gemm, x))
    S["level2/76_Gemm_Add_ReLU.py"] = ([(300, 130, (130,))], lambda: [[ru(70, 300)]], lambda m, x: torch.relu(x @ m.gemm.weight.t() + m.bias))
    ch81 = lambda v: torch.clamp(torch.tanh(torch.clamp(v * torch.sigmoid(v) / 2.0, -1, 1)), -1, 1)
    S["level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp.py"] = ([(300, 130), (300, 130, False)], lambda: [[rn(70, 300)]],
        lambda m, x: ch81(lin(m.gemm, x)))
    S["level2/86_Matmul_Divide_GELU.py"] = ([(300, 130, 10.0)], lambda: [[rn(70, 300)]], lambda m, x: F.gelu(lin(m.linear, x) / 10.0))
    def ch95(m, x):
        v = lin(m.matmul, x) + m.add_value
        v = torch.sigmoid(v) * v
        return F.hardtanh(F.gelu(torch.tanh(v)), -1, 1)
    S["level2/95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py"] = ([(300, 130, (130,))], lambda: [[rn(70, 300)]], ch95)
    S["level2/99_Matmul_GELU_Softmax.py"] = ([(300, 1030)], lambda: [[rn(70, 300)]], lambda m, x: torch.softmax(F.gelu(lin(m.linear, x)), 1))
    return S


def big_specs():
    """KernelBench-scale shapes for the candidates most at risk from size (accumulation error, indexing, speed)."""
    import torch
    import torch.nn.functional as F
    ru = lambda *s: torch.rand(*s, device="cuda")
    mm = lambda m, a, b: a @ b
    lin = lambda m, x: x @ m.weight.t() + m.bias
    return {
        "level1/1_Square_matrix_multiplication_.py": ((), lambda: [ru(4096, 4096), ru(4096, 4096)], mm),
        "level1/6_Matmul_with_large_K_dimension_.py": ((), lambda: [ru(256, 524288), ru(524288, 256)], mm),
        "level1/4_Matrix_vector_multiplication_.py": ((), lambda: [ru(2048, 1048576), ru(1048576, 1)], mm),
        "level1/23_Softmax.py": ((), lambda: [ru(4096, 393216)], lambda m, x: torch.softmax(x, 1)),
        "level1/24_LogSoftmax.py": ((1,), lambda: [ru(4096, 393216)], lambda m, x: torch.log_softmax(x, 1)),
        "level1/37_FrobeniusNorm_.py": ((), lambda: [ru(112, 64, 512, 512)], lambda m, x: x / torch.norm(x, p="fro")),
        "level1/40_LayerNorm.py": (((64, 256, 256),), lambda: [ru(16, 64, 256, 256)],
                                   lambda m, x: F.layer_norm(x, m.ln.normalized_shape, m.ln.weight, m.ln.bias, m.ln.eps)),
        "level1/47_Sum_reduction_over_a_dimension.py": ((1,), lambda: [ru(128, 4096, 4095)], lambda m, x: torch.sum(x, 1, keepdim=True)),
        "level1/89_cumsum.py": ((1,), lambda: [ru(32768, 32768)], lambda m, x: torch.cumsum(x, 1)),
        "level1/100_HingeLoss.py": ((), lambda: [ru(32768, 32768), torch.randint(0, 2, (32768,), device="cuda").float() * 2 - 1],
                                    lambda m, p, t: torch.mean(torch.clamp(1 - p * t, min=0))),
        "level2/59_Matmul_Swish_Scaling.py": ((32768, 32768, 2.0), lambda: [ru(128, 32768)],
                                              lambda m, x: lin(m.matmul, x) * torch.sigmoid(lin(m.matmul, x)) * 2.0),
        "level2/12_Gemm_Multiply_LeakyReLU.py": ((8192, 8192, 2.0, 0.1), lambda: [ru(1024, 8192)],
                                                 lambda m, x: F.leaky_relu(lin(m.gemm, x) * 2.0, 0.1)),
    }


def run_big(files, rel):
    import torch
    B = big_specs()
    out = {}
    for f in files:
        r = rel[f]
        if r not in B:
            continue
        init, inputs_fn, ref_fn = B[r]
        try:
            ns = {"__name__": "kbc_big"}
            exec(compile(open(f).read(), f, "exec"), ns)
            torch.manual_seed(0)
            m = ns["ModelNew"](*init).cuda()
            inp = inputs_fn()
            with torch.no_grad():
                ref = ref_fn(m, *inp)
                res = m(*inp)
                torch.cuda.synchronize()
                d = res.double() - ref.double()
                ok = bool(torch.allclose(res, ref, atol=1e-4, rtol=1e-4))
                rl2 = (d.norm() / ref.double().norm()).item()
                mabs = d.abs().max().item()
                del d, ref, res
                def t(fn):
                    fn(); torch.cuda.synchronize()
                    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    a.record()
                    for _ in range(5):
                        fn()
                    b.record(); torch.cuda.synchronize()
                    return a.elapsed_time(b) / 5
                ms_new = t(lambda: m(*inp))
                ms_ref = t(lambda: ref_fn(m, *inp))
            out[r] = dict(ok=ok and rl2 < 1e-2, max_abs=mabs, rel_l2=rl2, ms=ms_new, ms_torch=ms_ref)
        except Exception as e:
            out[r] = dict(ok=False, error=f"{type(e).__name__}: {e}"[-1000:])
        print(f"BIG {'PASS' if out[r]['ok'] else 'FAIL'} {r} {out[r]}", flush=True)
        torch.cuda.empty_cache()
    return out


HARNESS_PROBLEMS = {
    "level1/19_ReLU.py": '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.relu(x)
batch_size = 1 << 20
dim = 1 << 10
def get_inputs():
    return [torch.randn(batch_size, dim)]
def get_init_inputs():
    return []
''',
    "level2/76_Gemm_Add_ReLU.py": '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))
    def forward(self, x):
        return torch.relu(self.gemm(x) + self.bias)
batch_size = 512
in_features = 1024
out_features = 768
bias_shape = (out_features,)
def get_inputs():
    return [torch.rand(batch_size, in_features)]
def get_init_inputs():
    return [in_features, out_features, bias_shape]
''',
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=8, help="parallel build processes")
    ap.add_argument("--only", default=None, help="glob on e.g. level1/19_*")
    ap.add_argument("--json", default=None)
    ap.add_argument("--big", action="store_true", help="only run the KernelBench-scale checks in big_specs()")
    ap.add_argument("--harness", action="store_true", help="also run the baseline harness on two tiny authored problems")
    args = ap.parse_args()

    import torch
    files = sorted(glob.glob(os.path.join(HERE, "cuda", "level*", "*.py")))
    rel = {f: os.path.relpath(f, os.path.join(HERE, "cuda")) for f in files}
    if args.only:
        files = [f for f in files if fnmatch.fnmatch(rel[f], args.only)]
    os.environ.setdefault("MAX_JOBS", "2")
    if args.big:
        big_keys = set(big_specs())
        files = [f for f in files if rel[f] in big_keys]

    t0 = time.time()
    build_err = {}
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as ex:
        for path, dt, err in ex.map(_build, files):
            print(f"built {rel[path]} in {dt:.0f}s" + (" FAILED" if err else ""), flush=True)
            if err:
                build_err[path] = err
    print(f"builds done in {time.time() - t0:.0f}s", flush=True)

    if args.big:
        big = run_big(files, rel)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(big, fh, indent=1)
        return 0 if all(v["ok"] for v in big.values()) else 1

    S = specs()
    results = {}
    for f in files:
        r = rel[f]
        if f in build_err:
            results[r] = {"ok": False, "error": "build: " + build_err[f]}
            continue
        if r not in S:
            results[r] = {"ok": False, "error": "no smoke spec"}
            continue
        spec = S[r]
        inits, inputs_fn, ref_fn = spec[:3]
        prep = spec[3] if len(spec) > 3 else None
        worst = {"ok": True, "max_abs": 0.0, "rel_l2": 0.0, "cases": 0}
        try:
            ns = {"__name__": "kbc_smoke"}
            exec(compile(open(f).read(), f, "exec"), ns)
            torch.manual_seed(0)
            for init in inits:
                m = ns["ModelNew"](*init).cuda()
                if prep:
                    prep(m)
                for inp in inputs_fn():
                    with torch.no_grad():
                        if r.endswith("33_BatchNorm.py"):
                            rm0 = m.bn.running_mean.clone()
                        ref = ref_fn(m, *inp)
                        out = m(*inp)
                        torch.cuda.synchronize()
                    worst["cases"] += 1
                    if type(out) is not torch.Tensor or out.shape != ref.shape or out.dtype != ref.dtype:
                        worst.update(ok=False, error=f"init {init}: got {type(out).__name__} {getattr(out, 'shape', None)} "
                                                     f"{getattr(out, 'dtype', None)}, want {tuple(ref.shape)} {ref.dtype}")
                        continue
                    if not ref.is_floating_point():
                        if not torch.equal(out, ref):
                            worst.update(ok=False, error=f"init {init}: integer outputs differ ({(out != ref).sum().item()} elements)")
                        continue
                    d = (out.double() - ref.double())
                    mabs = d.abs().max().item() if d.numel() else 0.0
                    rl2 = (d.norm() / ref.double().norm().clamp_min(1e-30)).item()
                    worst["max_abs"] = max(worst["max_abs"], mabs)
                    worst["rel_l2"] = max(worst["rel_l2"], rl2)
                    if not torch.allclose(out, ref, atol=1e-4, rtol=1e-4) or rl2 >= 1e-2:
                        worst.update(ok=False, error=f"init {init} shapes {[tuple(getattr(i, 'shape', ())) for i in inp]}: "
                                                     f"max|d| {mabs:.3g} relL2 {rl2:.3g}")
                    if r.endswith("33_BatchNorm.py"):
                        x = inp[0]
                        want = 0.9 * rm0 + 0.1 * x.mean(dim=(0, 2, 3))
                        if not torch.allclose(m.bn.running_mean, want, atol=1e-5, rtol=1e-4):
                            worst.update(ok=False, error="running_mean not updated as nn.BatchNorm2d would")
        except Exception as e:
            worst = {"ok": False, "error": f"{type(e).__name__}: {e}"[-2000:], "trace": traceback.format_exc()[-2000:]}
        results[r] = worst
        status = "PASS" if worst.get("ok") else "FAIL"
        print(f"{status} {r}  cases={worst.get('cases')} max|d|={worst.get('max_abs', float('nan')):.2e} "
              f"relL2={worst.get('rel_l2', float('nan')):.2e} {worst.get('error', '')}", flush=True)

    n_ok = sum(v.get("ok", False) for v in results.values())
    print(f"{n_ok}/{len(results)} candidates pass the smoke test")

    harness = None
    if args.harness:
        with tempfile.TemporaryDirectory() as kb:
            for name, src in HARNESS_PROBLEMS.items():
                os.makedirs(os.path.join(kb, os.path.dirname(name)), exist_ok=True)
                with open(os.path.join(kb, name), "w") as fh:
                    fh.write(src)
            out_json = os.path.join(kb, "baseline.json")
            cmd = [sys.executable, os.path.join(HERE, "..", "kernelbench_style_baseline.py"), "--kernelbench-dir", kb,
                   "--candidates", os.path.join(HERE, "cuda"), "--only", "level1/19_ReLU.py,level2/76_Gemm_Add_ReLU.py", "--json", out_json,
                   "--trials", "20", "--set", "level1/19_ReLU.py:batch_size=4096"]
            p = subprocess.run(cmd, capture_output=True, text=True)
            print(p.stdout[-6000:], p.stderr[-3000:])
            harness = {"rc": p.returncode, "json": json.load(open(out_json)) if os.path.exists(out_json) else None}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"results": results, "harness": harness}, fh, indent=1, default=str)
    return 0 if n_ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
