"""Verdicts of a fixed set of CPU (and, with a GPU, CUDA) candidates, without timing figures: the record to compare
before and after a change that must not change what MooreEval decides.

Each case is (name, task, candidate, backend, overrides, config changes). What is kept of a verdict: status, the
reward's sign, pass fraction, legality, the stages' outcomes, every trial's pass/fail, violations, and flags with
their numbers masked (timing figures and speedups vary run to run; what a flag says does not), less the flags that
only report timing figures (`TIMING_FLAGS`). The master seed is
fixed, so the trials' inputs are the same in both runs.

    python benchmarks/verdict_snapshot.py /tmp/verdicts_before.json
    python benchmarks/verdict_snapshot.py /tmp/verdicts_after.json --compare /tmp/verdicts_before.json
    python benchmarks/verdict_snapshot.py out.json --gpu     # adds the CUDA and Triton examples on a GPU

Prints one row per case; `--compare` prints the fields that differ and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EX = REPO / "examples"
ADV = REPO / "tests" / "adversarial" / "candidates"
FR = REPO / "tests" / "false_reject" / "candidates"
RELU, GELU = EX / "tasks" / "relu.py", EX / "tasks" / "linear_gelu.py"
SMALL = Path(os.environ.get("KERNELBENCH_SMALL_DIR", REPO.parent / "shared" / "kernelbench-small")) / "level1"
MATMUL = SMALL / "1_Square_matrix_multiplication_.py"
RELU_CPU = (EX / "candidates" / "relu_cpu.py").read_text()
FORWARD = "        return relu_ext.relu_forward(x)\n"
SMALL_RELU = {"batch_size": 4, "dim": 1024}

# a task whose inputs fail only inside the candidate's worker: the harness's fault (infra_error), never the candidate's
FAILING_TASK = '''
import sys
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    if "candidate" in sys.modules:
        raise ValueError("the harness could not make inputs")
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
'''


def cases(gpu: bool) -> list[tuple]:
    tmp = Path(tempfile.mkdtemp(prefix="verdict_snapshot_"))
    failing = tmp / "failing_task.py"
    failing.write_text(FAILING_TASK)
    raising = RELU_CPU.replace(FORWARD, "        y = relu_ext.relu_forward(x)\n"
                                        "        raise RuntimeError('the candidate gave up')\n")
    broken = RELU_CPU.replace("return out;", "return out")  # a C++ syntax error
    out = [
        ("relu_cpu", RELU, EX / "candidates" / "relu_cpu.py", "cpu", None, {}),
        ("relu_cpu_extra_shapes", RELU, EX / "candidates" / "relu_cpu.py", "cpu", SMALL_RELU,
         {"extra_shapes": [{"batch_size": 3, "dim": 512}], "time_candidate": False}),
        ("linear_gelu_cpu", GELU, EX / "candidates" / "linear_gelu_cpu.py", "cpu", None, {}),
        ("relu_triton_interpreted", RELU, EX / "candidates" / "relu_triton.py", "triton", SMALL_RELU, {}),
        ("no_code", RELU, "I could not write this kernel.", None, None, {}),
        ("compile_error", RELU, broken, "cpu", SMALL_RELU, {}),
        ("runtime_error", RELU, raising, "cpu", SMALL_RELU, {}),
        ("harness_fault", failing, EX / "candidates" / "relu_cpu.py", "cpu", None, {"time_candidate": False}),
    ]
    for name, task in (("pytorch_fallback", RELU), ("environment_at_import", RELU), ("decoy_kernel", RELU),
                       ("input_mutation", RELU), ("tensor_subclass_output", RELU), ("crash", RELU), ("hang", RELU),
                       ("input_resized_while_timed", RELU), ("output_cache_with_token_launch", RELU),
                       ("output_claims_a_terabyte", RELU), ("output_claims_a_terabyte_while_timed", RELU),
                       ("input_broken_for_the_reference", MATMUL)):
        out.append((f"adv/{name}", task, ADV / f"{name}.py", "cpu", None, {}))
    for name in ("no_kernel_reached", "torch_in_dict"):
        out.append((f"false_reject/illegal/{name}", RELU, FR / "illegal" / f"{name}.py", "cpu", SMALL_RELU, {}))
    for name in ("cpu_ext_on_self", "cpu_functools_partial"):
        out.append((f"false_reject/legal/{name}", RELU, FR / "legal" / f"{name}.py", "cpu", SMALL_RELU, {}))
    if gpu:
        out += [("relu_cuda", RELU, EX / "candidates" / "relu_cuda.py", "cuda", None, {}),
                ("relu_triton", RELU, EX / "candidates" / "relu_triton.py", "triton", None, {})]
    return out


# flags that report timing figures (a re-timed outlier, a reference slower in the candidate's worker than in a clean
# one): notes for the reader that come and go with the host's load, so they are left out of the comparison
TIMING_FLAGS = ("outlier speedup ", "the reference ran ")


def _flags(flags: list[str]) -> list[str]:
    return sorted(re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", f) for f in flags if not f.startswith(TIMING_FLAGS))


def summary(v) -> dict:
    """What must not change: the verdict without its timing figures (numbers in flags masked, timing notes left out)."""
    sign = None if v.reward is None else (v.reward > 0) - (v.reward < 0)
    return {"status": v.status, "reward_sign": sign, "pass_fraction": v.pass_fraction, "legal": v.legal,
            "correct": v.correct, "stages": {k: s for k, s in sorted(v.stages.items())},
            "trials": [t.passed for t in v.trials], "violations": list(v.violations),
            "flags": _flags(v.flags)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="JSON file to write")
    ap.add_argument("--compare", type=Path, help="an earlier snapshot: print the differences, exit 1 if any")
    ap.add_argument("--gpu", action="store_true", help="add the CUDA and Triton examples (needs a GPU)")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = ap.parse_args()

    from musacoder import VerifyConfig, verify

    base = VerifyConfig(seed=20240917, timeout_s=25.0, warmup=1, repeats=5, max_repeats=10, time_budget_s=1.0)
    got: dict[str, dict] = {}
    print(f"{'case':48} {'status':14} {'sign':>4} {'pass':>5} {'legal':>5} {'s':>6}")
    for name, task, cand, backend, overrides, changes in cases(args.gpu):
        if args.only not in name:
            continue
        t0 = time.monotonic()
        v = verify(task, cand, backend=backend, overrides=overrides, config=base.model_copy(update=changes))
        got[name] = summary(v)
        g = got[name]
        print(f"{name:48} {g['status']:14} {str(g['reward_sign']):>4} {g['pass_fraction']:>5.2f} {str(g['legal']):>5} "
              f"{time.monotonic() - t0:6.1f}", flush=True)
    args.out.write_text(json.dumps(got, indent=1))
    if not args.compare:
        return 0
    before = json.loads(args.compare.read_text())
    diffs = []
    for name in sorted(set(before) | set(got)):
        a, b = before.get(name), got.get(name)
        if a is not None:
            a = {**a, "flags": _flags(a["flags"])}  # an earlier snapshot may have kept the timing notes
        if a is None or b is None:
            diffs.append(f"{name}: only in {'the new' if a is None else 'the earlier'} snapshot")
            continue
        diffs += [f"{name}.{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    print("\n".join(diffs) if diffs else f"identical: {len(got)} verdicts")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
