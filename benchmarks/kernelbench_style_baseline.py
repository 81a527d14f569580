"""Baseline for verdict throughput: a sequential, in-process, KernelBench-style evaluation loop.

This is what the faster evaluators are compared against. It follows the shape of KernelBench's
``eval_kernel_against_ref`` (re-written from its description, not copied):

for each (problem file, candidate file) pair, in one Python process, one after the other:

1. ``exec`` the problem source (defines ``Model``, ``get_inputs``, ``get_init_inputs`` and the size constants),
   then apply ``--set NAME=VALUE`` overrides to its module globals (``get_inputs`` reads them at call time);
2. ``exec`` the candidate source in the same process: its module-level ``load_inline`` builds the extension
   with torch's default per-name build directory. Unless ``--warm``, that directory is deleted first, so every
   candidate is a cold build (``build_s``);
3. build ``Model`` and ``ModelNew`` from ``get_init_inputs()`` under the same seed, move both to the GPU;
4. correctness: ``--correct-trials`` (5) trials, each with its own seed drawn from the base seed; the same
   inputs go to both models; outputs must match in shape and satisfy ``allclose(atol, rtol)`` (1e-4 for fp32);
   the relative L2 error is recorded too (informational);
5. timing (only if correct): 3 warm-up calls, then ``--trials`` (100) timed calls, each with a fresh CUDA event
   pair recorded on the current stream around one call, preceded by a 256 MB L2 flush, followed by a
   device synchronize.

Per candidate it records ``build_s``, ``total_s`` (wall seconds for the whole pair), ``correct``, and
``runtime_ms`` (mean of the timed calls; also std/min/max), plus the error text for compile / runtime failures.
The run summary gives ``verdicts_per_minute`` = number of pairs that reached a verdict / wall minutes.

Known weaknesses (on purpose, this is the baseline): everything shares one process and one CUDA context, so a
candidate that corrupts the context (illegal address) poisons every later verdict; the reference output lives
in the same process as the candidate; nothing is sandboxed. Size constants derived at module level from other
constants (e.g. ``bias_shape = (out_features,)``) are not recomputed: override them too.

Usage:
    python benchmarks/kernelbench_style_baseline.py --kernelbench-dir DIR --candidates benchmarks/candidates/cuda \
        [--limit N] [--json OUT.json] [--warm] [--set NAME=VALUE ...] [--set 'level1/19_*:batch_size=64' ...]

The candidate ``CANDS/level1/19_ReLU.py`` is evaluated against ``DIR/level1/19_ReLU.py``.
"""
from __future__ import annotations

import argparse
import ast
import fnmatch
import gc
import glob
import json
import math
import os
import platform
import re
import shutil
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field


@dataclass
class PairResult:
    """Outcome of one (problem, candidate) pair."""

    problem: str                      # e.g. "level1/19_ReLU.py"
    verdict: str = "pending"          # correct | incorrect | compile_error | runtime_error | missing_problem
    correct: bool = False
    build_s: float = 0.0              # wall seconds spent exec'ing the candidate (load_inline build + import)
    total_s: float = 0.0              # wall seconds for the whole pair
    runtime_ms: float | None = None   # mean of the timed calls
    runtime_std_ms: float | None = None
    runtime_min_ms: float | None = None
    runtime_max_ms: float | None = None
    trials_passed: int = 0
    max_abs_diff: float | None = None
    max_rel_l2: float | None = None
    error: str | None = None
    overrides: dict = field(default_factory=dict)


def problem_sort_key(rel: str):
    level = rel.split("/")[0]
    m = re.match(r"(\d+)_", os.path.basename(rel))
    return (level, int(m.group(1)) if m else 10**9, rel)


def discover_pairs(kb_dir: str, cand_dir: str) -> list[tuple[str, str, str]]:
    """Return (relative name, problem path, candidate path), sorted by level then problem number."""
    pairs = []
    for cand in glob.glob(os.path.join(cand_dir, "level*", "*.py")):
        rel = os.path.relpath(cand, cand_dir).replace(os.sep, "/")
        pairs.append((rel, os.path.join(kb_dir, rel), cand))
    return sorted(pairs, key=lambda p: problem_sort_key(p[0]))


def parse_overrides(specs: list[str]) -> list[tuple[str | None, str, object]]:
    """``[SCOPE:]NAME=VALUE`` -> (scope glob or None, name, literal value)."""
    out = []
    for spec in specs:
        scope = None
        lhs, _, value = spec.partition("=")
        if not _:
            raise SystemExit(f"--set expects NAME=VALUE, got {spec!r}")
        if ":" in lhs:
            scope, lhs = lhs.rsplit(":", 1)
        try:
            val = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            val = value
        out.append((scope, lhs.strip(), val))
    return out


def apply_overrides(ns: dict, rel: str, overrides) -> dict:
    applied = {}
    for scope, name, val in overrides:
        if scope is not None and not fnmatch.fnmatch(rel, scope):
            continue
        if name in ns:  # only existing module-level constants; never invent new ones
            ns[name] = val
            applied[name] = val
    return applied


def extension_names(src: str) -> list[str]:
    """Names passed to load_inline(name=...) / load(name=...) in a candidate (string literals only)."""
    names = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    names.append(kw.value.value)
    return names


def clear_build_dirs(names: list[str]) -> None:
    """Delete torch's default per-name build directories so the next load_inline is a cold build."""
    from torch.utils import cpp_extension
    root = cpp_extension.get_default_build_root()
    for name in names:
        for d in glob.glob(os.path.join(root, "*", name)) + [os.path.join(root, name)]:
            shutil.rmtree(d, ignore_errors=True)


def to_device(obj, device):
    import torch
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(o, device) for o in obj)
    return obj


def seed_all(seed: int) -> None:
    import torch
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)


def compare(ref, out, atol: float, rtol: float) -> tuple[bool, float, float, str | None]:
    """allclose-style comparison; returns (ok, max_abs_diff, rel_l2, reason)."""
    import torch
    if not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        return False, math.inf, math.inf, f"output is {type(out).__name__}, expected torch.Tensor"
    if out.shape != ref.shape:
        return False, math.inf, math.inf, f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    if out.dtype != ref.dtype:
        return False, math.inf, math.inf, f"dtype {out.dtype} != reference {ref.dtype}"
    if not ref.is_floating_point():
        eq = torch.equal(out, ref)
        return eq, 0.0 if eq else math.inf, 0.0 if eq else math.inf, None if eq else "integer outputs differ"
    diff = (out.double() - ref.double()).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    ref_norm = float(ref.double().norm())
    rel_l2 = float((out.double() - ref.double()).norm()) / ref_norm if ref_norm > 0 else float(diff.norm())
    ok = bool(torch.allclose(out, ref, atol=atol, rtol=rtol))
    return ok, max_abs, rel_l2, None if ok else f"allclose failed (max |diff| {max_abs:.3g}, rel L2 {rel_l2:.3g})"


def evaluate_pair(rel, problem_path, cand_path, args, overrides, flush_buf) -> PairResult:
    import torch
    res = PairResult(problem=rel)
    t_pair = time.perf_counter()
    device = torch.device(args.device)
    if not os.path.exists(problem_path):
        res.verdict, res.error = "missing_problem", f"no problem file {problem_path}"
        return res
    ident = re.sub(r"\W", "_", rel)
    problem_ns: dict = {"__name__": f"kb_problem_{ident}", "__file__": problem_path}
    exec(compile(open(problem_path).read(), problem_path, "exec"), problem_ns)
    res.overrides = apply_overrides(problem_ns, rel, overrides)

    cand_src = open(cand_path).read()
    if not args.warm:
        clear_build_dirs(extension_names(cand_src))
    cand_ns: dict = {"__name__": f"kb_candidate_{ident}", "__file__": cand_path}
    t_build = time.perf_counter()
    try:
        exec(compile(cand_src, cand_path, "exec"), cand_ns)
        if "ModelNew" not in cand_ns:
            raise RuntimeError("candidate defines no ModelNew")
    except Exception as e:  # compile errors surface here
        res.build_s = time.perf_counter() - t_build
        res.verdict, res.error = "compile_error", f"{type(e).__name__}: {str(e)[-2000:]}"
        res.total_s = time.perf_counter() - t_pair
        return res
    res.build_s = time.perf_counter() - t_build

    model = model_new = inputs = ref_out = new_out = None
    try:
        init_inputs = to_device(problem_ns["get_init_inputs"](), device)
        seed_all(args.seed)
        model = problem_ns["Model"](*init_inputs).to(device)
        seed_all(args.seed)
        model_new = cand_ns["ModelNew"](*init_inputs).to(device)
        torch.cuda.synchronize(device)

        # correctness
        gen = torch.Generator().manual_seed(args.seed)
        trial_seeds = [int(torch.randint(0, 2**31 - 1, (1,), generator=gen)) for _ in range(args.correct_trials)]
        max_abs, max_rel = 0.0, 0.0
        passed = 0
        reason = None
        with torch.no_grad():
            for ts in trial_seeds:
                seed_all(ts)
                inputs = to_device(problem_ns["get_inputs"](), device)
                seed_all(ts)
                ref_out = model(*inputs)
                torch.cuda.synchronize(device)
                seed_all(ts)
                new_out = model_new(*inputs)
                torch.cuda.synchronize(device)
                ok, mabs, rl2, why = compare(ref_out, new_out, args.atol, args.rtol)
                max_abs, max_rel = max(max_abs, mabs), max(max_rel, rl2)
                passed += int(ok)
                reason = reason or why
                ref_out = new_out = None
                if not ok:
                    break  # KernelBench stops at the first failing trial
        res.trials_passed, res.max_abs_diff, res.max_rel_l2 = passed, max_abs, max_rel
        res.correct = passed == args.correct_trials
        res.verdict = "correct" if res.correct else "incorrect"
        res.error = None if res.correct else reason

        # timing (correct candidates only), on the last trial's inputs
        if res.correct and args.trials > 0:
            stream = torch.cuda.current_stream(device)
            with torch.no_grad():
                for _ in range(args.warmup):
                    model_new(*inputs)
                torch.cuda.synchronize(device)
                times = []
                for _ in range(args.trials):
                    flush_buf.zero_()  # evict the 50 MB L2 (256 MB written)
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record(stream)
                    model_new(*inputs)
                    end.record(stream)
                    torch.cuda.synchronize(device)
                    times.append(start.elapsed_time(end))
            res.runtime_ms = statistics.fmean(times)
            res.runtime_std_ms = statistics.pstdev(times)
            res.runtime_min_ms, res.runtime_max_ms = min(times), max(times)
    except Exception as e:
        res.verdict, res.correct = "runtime_error", False
        res.error = f"{type(e).__name__}: {str(e)[-2000:]}"
        if args.verbose:
            traceback.print_exc()
    finally:
        del model, model_new, inputs, ref_out, new_out
        gc.collect()
        try:
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
        except Exception:
            pass  # a poisoned context shows up in the next pair's verdict
    res.total_s = time.perf_counter() - t_pair
    return res


def print_table(results: list[PairResult]) -> None:
    cols = ("problem", "verdict", "build_s", "total_s", "runtime_ms", "rel_l2")
    rows = [(r.problem, r.verdict, f"{r.build_s:.1f}", f"{r.total_s:.1f}",
             "-" if r.runtime_ms is None else f"{r.runtime_ms:.3f}",
             "-" if r.max_rel_l2 is None else f"{r.max_rel_l2:.1e}") for r in results]
    try:
        from rich.console import Console
        from rich.table import Table
        t = Table(title="KernelBench-style sequential baseline")
        for c in cols:
            t.add_column(c, justify="left" if c in ("problem", "verdict") else "right")
        for row in rows:
            t.add_row(*row)
        Console().print(t)
    except ImportError:
        widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
        print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
        for row in rows:
            print("  ".join(v.ljust(w) for v, w in zip(row, widths)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench-dir", required=True, help="folder holding level1/, level2/, ... problem files")
    ap.add_argument("--candidates", required=True, help="folder holding level*/<problem file name> candidates")
    ap.add_argument("--limit", type=int, default=None, help="evaluate only the first N pairs")
    ap.add_argument("--only", default=None, help="comma-separated globs on the relative name, e.g. 'level1/2*,level2/76_*'")
    ap.add_argument("--json", default=None, help="write per-candidate results and the summary here")
    ap.add_argument("--warm", action="store_true", help="keep torch's build directories (no forced cold build)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="[SCOPE:]NAME=VALUE",
                    help="override a module-level constant of the problem files (SCOPE: glob on e.g. level1/19_ReLU.py)")
    ap.add_argument("--correct-trials", type=int, default=5)
    ap.add_argument("--trials", type=int, default=100, help="timed calls per correct candidate")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    import torch
    if not torch.cuda.is_available():
        print("error: no CUDA device; this baseline runs candidates on the GPU", file=sys.stderr)
        return 2
    torch.cuda.set_device(torch.device(args.device))
    overrides = parse_overrides(args.overrides)
    pairs = discover_pairs(args.kernelbench_dir, args.candidates)
    if args.only:
        pats = [g.strip() for g in args.only.split(",") if g.strip()]
        pairs = [p for p in pairs if any(fnmatch.fnmatch(p[0], g) for g in pats)]
    if args.limit is not None:
        pairs = pairs[: args.limit]
    if not pairs:
        print("error: no candidate files found under", args.candidates, file=sys.stderr)
        return 2

    flush_buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.float32, device=args.device)
    results: list[PairResult] = []
    t0 = time.perf_counter()
    for i, (rel, prob, cand) in enumerate(pairs, 1):
        r = evaluate_pair(rel, prob, cand, args, overrides, flush_buf)
        results.append(r)
        rt = "" if r.runtime_ms is None else f" {r.runtime_ms:.3f} ms"
        print(f"[{i}/{len(pairs)}] {rel}: {r.verdict} build {r.build_s:.1f}s total {r.total_s:.1f}s{rt}"
              + (f"  ({r.error.splitlines()[0][:160]})" if r.error else ""), flush=True)
    wall_s = time.perf_counter() - t0

    verdicts = sum(r.verdict != "missing_problem" for r in results)
    summary = {
        "pairs": len(results),
        "verdicts": verdicts,
        "correct": sum(r.correct for r in results),
        "by_verdict": {v: sum(r.verdict == v for r in results) for v in sorted({r.verdict for r in results})},
        "wall_s": wall_s,
        "build_s_total": sum(r.build_s for r in results),
        "verdicts_per_minute": verdicts / (wall_s / 60.0) if wall_s > 0 else None,
        "warm": args.warm,
        "settings": {k: getattr(args, k) for k in ("correct_trials", "trials", "warmup", "atol", "rtol", "seed", "device")},
        "overrides": args.overrides,
        "gpu": torch.cuda.get_device_name(torch.device(args.device)),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "command": " ".join(sys.argv),
    }
    print_table(results)
    print(f"{summary['correct']}/{len(results)} correct; {verdicts} verdicts in {wall_s:.1f}s "
          f"= {summary['verdicts_per_minute']:.2f} verdicts/min (build {summary['build_s_total']:.1f}s)")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "results": [asdict(r) for r in results]}, f, indent=2)
        print("wrote", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
