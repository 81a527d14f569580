"""Calibration of the precision rule (`musacoder.judge.compare`): where it can tell reduced precision from fp32, and
how far honest fp32 summation orders stay from its bound.

For GEMMs (M×K @ K×N) and row sums of length R, on the task's usual positive uniform inputs (`plain`) and on zero-mean
ones (`center`, as the structured trials make them), it prints per case: torch's own fp32 error e_t and the error of
operands rounded to a 10-bit mantissa e_low (both against float64; for sums, torch's row-sum kernel), whether the trial has power (e_low ≥ 128·e_t),
and the error of each candidate arithmetic as a multiple of the bound τ: a sequential fp32 accumulation (one term at
a time, as a one-thread-per-output kernel sums), and fp16, TF32 and bf16 operands with fp32 accumulation. A ratio
above 1 is rejected where the trial has power. Runs on the CPU (torch's CPU kernels stand for the reference).

    python benchmarks/precision_calibration.py [--json OUT.json] [--seed 0]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from musacoder.judge.compare import Yardstick, rel_error, round_mantissa


def _sequential(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    prod = a.numpy()[:, None, :] * b.numpy().T[None, :, :]
    return torch.from_numpy(np.cumsum(prod.astype(np.float32), axis=2, dtype=np.float32)[..., -1])


def _row(name: str, dist: str, a: torch.Tensor, b: torch.Tensor, reduction: bool = False) -> dict:
    """One case; with `reduction`, b is a column of ones and torch's own output is its row-sum kernel's."""
    ref64 = a.double() @ b.double()
    mine = a.sum(1, keepdim=True) if reduction else a @ b
    ys = Yardstick(ref64, rel_error(mine, ref64), rel_error(round_mantissa(a) @ round_mantissa(b), ref64))
    tau = ys.bound(torch.float32)
    arith = {"seq_fp32": _sequential(a, b), "fp16": a.half().float() @ b.half().float(),
             "tf32": round_mantissa(a) @ round_mantissa(b), "bf16": a.bfloat16().float() @ b.bfloat16().float()}
    return {"case": name, "inputs": dist, "e_t": ys.torch_error, "e_low": ys.low_error, "power": ys.has_power,
            "tau": tau, **{k: rel_error(v, ref64) / tau for k, v in arith.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    g = torch.Generator().manual_seed(a.seed)
    rows = []
    for dist in ("plain", "center"):
        shift = 0.5 if dist == "center" else 0.0
        for m, k, n in ((32, 64, 32), (32, 4096, 32), (16, 8192, 16), (8, 524288, 8)):
            rows.append(_row(f"gemm K={k}", dist, torch.rand(m, k, generator=g) - shift,
                             torch.rand(k, n, generator=g) - shift))
        for r in (4096, 32768, 393216):
            rows.append(_row(f"sum R={r}", dist, torch.rand(8, r, generator=g) - shift, torch.ones(r, 1), True))
    print("| case | inputs | e_t | e_low | power | seq fp32 / τ | fp16 / τ | tf32 / τ | bf16 / τ |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['inputs']} | {r['e_t']:.2e} | {r['e_low']:.2e} | {'yes' if r['power'] else 'no'} | "
              f"{r['seq_fp32']:.2f} | {r['fp16']:.2f} | {r['tf32']:.2f} | {r['bf16']:.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"seed": a.seed, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
