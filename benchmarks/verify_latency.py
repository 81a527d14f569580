"""Wall time of one `musacoder verify` call, as a user runs it (a fresh process each time), warm or cold:

    python benchmarks/verify_latency.py --runs 7 --json verify_latency.json
    python benchmarks/verify_latency.py --runs 7 --variant before=/tmp/before/src --variant after=src --cold

Each run is `python -m musacoder.cli verify --task T --candidate C --json` (default: the README's example, the ReLU
task and its C++ candidate on the CPU), timed from the parent (process start to exit). Warm runs share one build
cache (`--cache-dir`, default `MUSACODER_CACHE_DIR`), so the candidate's extension is already built; `--cold` adds one
first run per variant with an empty cache of its own (the build and every kept judgement paid). `--variant
LABEL=SRC` runs another checkout's package (its `src/` first on PYTHONPATH; the workers follow it): the variants are
interleaved run by run, so a busy moment of the machine falls on all of them alike. Before the timed runs, each
variant makes one more warm call (the `first s` column): `verify` keeps its fork server for the next call
(docs/architecture.md), so this first call starts it and the timed ones find it ready. The table gives each
variant's min/median/max wall seconds and the median of each stage of the verdict (`stage_s`, `wall_s`: the
verification inside the process); `--json` writes every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(src: Path, cache_dir: Path, task: Path, candidate: Path, extra: list[str]) -> dict:
    """One verify call in a fresh process: its wall seconds, exit code and verdict (None where no JSON came back)."""
    env = dict(os.environ, MUSACODER_CACHE_DIR=str(cache_dir))
    env["PYTHONPATH"] = str(src) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "musacoder.cli", "verify", "--task", str(task), "--candidate", str(candidate),
           "--json", *extra]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    try:
        verdict = json.loads(p.stdout)
    except ValueError:
        verdict = None
    return {"wall_s": round(wall, 3), "rc": p.returncode, "status": verdict and verdict.get("status"),
            "verdict_wall_s": verdict and verdict.get("wall_s"), "stage_s": (verdict or {}).get("stage_s", {}),
            "speedup": verdict and verdict.get("speedup"), "stderr": p.stderr[-600:] if p.returncode else ""}


def summary(runs: list[dict]) -> dict:
    walls = [r["wall_s"] for r in runs]
    stages: dict[str, list[float]] = {}
    for r in runs:
        for k, x in r["stage_s"].items():
            stages.setdefault(k, []).append(x)
    inside = [r["verdict_wall_s"] for r in runs if r["verdict_wall_s"] is not None]
    return {"runs": len(runs), "min": min(walls), "median": statistics.median(walls), "max": max(walls),
            "verify_wall_median": statistics.median(inside) if inside else None,
            "statuses": sorted({str(r["status"]) for r in runs}),
            "stage_median": {k: round(statistics.median(x), 3) for k, x in stages.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", type=Path, default=ROOT / "examples/tasks/relu.py")
    ap.add_argument("--candidate", type=Path, default=ROOT / "examples/candidates/relu_cpu.py")
    ap.add_argument("--runs", type=int, default=5, help="Warm runs per variant.")
    ap.add_argument("--cold", action="store_true", help="First, one run per variant with an empty cache.")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=SRC",
                    help="A checkout's src/ to run (repeatable); default: this one's.")
    ap.add_argument("--cache-dir", type=Path, default=None, help="Warm build cache (default: MUSACODER_CACHE_DIR, "
                                                                  "else a new one, warmed by an untimed run).")
    ap.add_argument("--json", type=Path, default=None, help="Write every run and the summaries here.")
    ap.add_argument("verify_args", nargs="*", help="More arguments for `musacoder verify` (after --).")
    a = ap.parse_args()
    variants = [tuple(v.split("=", 1)) for v in a.variant] or [("this", str(ROOT / "src"))]
    variants = [(label, Path(src).resolve()) for label, src in variants]
    cache = a.cache_dir or (Path(os.environ["MUSACODER_CACHE_DIR"]) if os.environ.get("MUSACODER_CACHE_DIR") else None)
    tmp = tempfile.TemporaryDirectory(prefix="verify-latency-")
    if cache is None:
        cache = Path(tmp.name) / "warm"
        run_once(variants[0][1], cache, a.task, a.candidate, a.verify_args)  # builds the extension: not timed
    results: dict[str, dict] = {label: {"src": str(src), "cold": None, "first": None, "warm": []}
                                for label, src in variants}
    if a.cold:
        for label, src in variants:
            results[label]["cold"] = run_once(src, Path(tmp.name) / f"cold-{label}", a.task, a.candidate,
                                              a.verify_args)
    for label, src in variants:
        results[label]["first"] = run_once(src, cache, a.task, a.candidate, a.verify_args)
    for _ in range(a.runs):
        for label, src in variants:
            results[label]["warm"].append(run_once(src, cache, a.task, a.candidate, a.verify_args))
    print(f"musacoder verify --task {a.task.relative_to(ROOT) if a.task.is_relative_to(ROOT) else a.task} "
          f"--candidate {a.candidate.relative_to(ROOT) if a.candidate.is_relative_to(ROOT) else a.candidate} --json; "
          f"{os.cpu_count()} CPUs; {a.runs} warm run(s) per variant\n")
    print(f"{'variant':<10} {'cold s':>7} {'first s':>8} {'min s':>7} {'median s':>9} {'max s':>7} {'in verify':>10}"
          "  statuses")
    for label, r in results.items():
        s = r["summary"] = summary(r["warm"]) if r["warm"] else None
        cold = f"{r['cold']['wall_s']:.2f}" if r["cold"] else "-"
        first = f"{r['first']['wall_s']:.2f}" if r["first"] else "-"
        if s:
            inside = f"{s['verify_wall_median']:.2f}" if s["verify_wall_median"] is not None else "-"
            print(f"{label:<10} {cold:>7} {first:>8} {s['min']:>7.2f} {s['median']:>9.2f} {s['max']:>7.2f} "
                  f"{inside:>10}  {', '.join(s['statuses'])}")
    keys = list(dict.fromkeys(k for r in results.values() if r.get("summary") for k in r["summary"]["stage_median"]))
    if keys:
        print("\nmedian seconds per stage (the verdict's stage_s)")
        print(f"{'stage':<28}" + "".join(f"{label:>10}" for label in results))
        for k in keys:
            print(f"{k:<28}" + "".join(f"{r['summary']['stage_median'].get(k, float('nan')):>10.3f}"
                                       for r in results.values()))
    failed = [r for res in results.values() for r in res["warm"] + [x for x in (res["cold"], res["first"]) if x]
              if r["rc"]]
    for r in failed[:3]:
        print(f"\nexit {r['rc']}: {r['stderr']}", file=sys.stderr)
    if a.json:
        a.json.write_text(json.dumps({"task": str(a.task), "candidate": str(a.candidate), "cpus": os.cpu_count(),
                                      "results": results}, indent=1))
    tmp.cleanup()


if __name__ == "__main__":
    main()
