"""An RFT pool for the golden set's tasks, every sample verified by MooreEval (`musacoder data rft`'s two steps).

    python benchmarks/rft_golden.py --kernelbench-dir .kb --candidates benchmarks/candidates/cuda --backend cuda \
        --max-input-mb 64 --workers 14 --out /tmp/rft_golden
    python benchmarks/rft_golden.py --backend cpu --out /tmp/rft_cpu          # the CPU examples, for a check here

The tasks are the golden candidates' KernelBench tasks, written with their sizes shrunk to `--max-input-mb` (as
`benchmarks/throughput.py` shrinks them; 1e9 keeps the task files' own sizes) into OUT/tasks; the `dir:` model at
OUT/responses answers each with two samples: the golden candidate, and the same kernel with comments added (its
builds come from the cache), which the clustering must put in the same cluster. `musacoder.data.solutions.generate`
verifies both (OUT/run, resumable); then, where `datasets` is installed, `musacoder.data.rft.build_rft` writes the
pools to OUT/rft (elsewhere: `--build-only` on a machine that has it, with the run folder copied). Prints a table and
writes OUT/summary.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))


def reformatted(code: str) -> str:
    """The same program with other Python around it: comments added above and below. Its kernel sources are
    untouched, so their builds come from the cache and the sample costs only its run."""
    return f"# the same kernel, sampled again\n{code.rstrip()}\n\n# end of the second sample\n"


def prepare(out: Path, backend: str, kb: Path, cands: Path, max_mb: float, limit: int) -> int:
    """Write OUT/tasks and OUT/responses; returns the number of tasks."""
    from musacoder.tasks import apply_overrides

    if backend == "cpu":
        from sandbox_overhead import cpu_manifest

        pairs = [(Path(r["task"]).stem, Path(r["task"]), Path(r["candidate"]), {}) for r in cpu_manifest(1)]
    else:
        from throughput import runnable_pairs

        pairs = [(i.split("/")[-1], t, c, over) for i, t, c, over in runnable_pairs(kb, cands, max_mb, limit=limit)]
    for name, task, cand, over in pairs:
        (out / "tasks").mkdir(parents=True, exist_ok=True)
        (out / "tasks" / f"{name}.py").write_text(apply_overrides(task.read_text(), over, str(task)) if over
                                                  else task.read_text())
        d = out / "responses" / name
        d.mkdir(parents=True, exist_ok=True)
        code = cand.read_text()
        (d / "0.txt").write_text(f"```python\n{code}```\n")
        (d / "1.txt").write_text(f"```python\n{reformatted(code)}```\n")
    return len(pairs)


def summarise(out: Path) -> dict:
    verdicts = [json.loads(line) for line in (out / "run" / "verdicts.jsonl").read_text().splitlines() if line.strip()] \
        if (out / "run" / "verdicts.jsonl").exists() else []
    return {"samples_verified": len(verdicts),
            "statuses": dict(Counter((v.get("verdict") or {}).get("status") for v in verdicts))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cuda")
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--candidates", type=Path, default=REPO / "benchmarks" / "candidates" / "cuda")
    ap.add_argument("--max-input-mb", type=float, default=64)
    ap.add_argument("--limit", type=int, default=0, help="cuda: first N golden candidates (0: all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--build-only", action="store_true", help="only build OUT/rft from an existing OUT/run")
    ap.add_argument("--compile-baseline", action="store_true",
                    help="also time torch.compile for each sample (the bench default on cuda; off here: a pool needs "
                         "the verdict, and compiling every reference took ~10 s of each verification on the H200)")
    a = ap.parse_args()
    if not a.build_only:
        from musacoder.data.solutions import generate

        n = prepare(a.out, a.backend, a.kernelbench_dir, a.candidates, a.max_input_mb, a.limit)
        if not n:
            raise SystemExit("no tasks (check --kernelbench-dir and --candidates)")
        print(f"{n} tasks, 2 samples each, backend {a.backend}, {a.workers} workers", flush=True)
        generate(a.out / "tasks", a.out / "run", model=f"dir:{a.out / 'responses'}", backend=a.backend, samples=2,
                 turns=1, keep_optimizing=False, workers=a.workers, progress=False,
                 verify={"time_compile_baseline": a.compile_baseline})
    summary = summarise(a.out)
    try:
        from musacoder.data.rft import build_rft

        summary["rft"] = build_rft(a.out / "run", a.out, cap=4, threshold=0.7,
                                   made_by="python benchmarks/rft_golden.py " + " ".join(sys.argv[1:]))
    except ImportError as e:
        summary["rft"] = f"not built here ({e}): run with --build-only where it is installed"
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print("\n| samples verified | statuses | tasks with a pool | accepted → pool members |\n|---|---|---|---|")
    rft = summary["rft"]
    pools = (f"{rft['tasks_with_pool']}/{rft['tasks']}", f"{rft['accepted']} → {rft['pooled']}") \
        if isinstance(rft, dict) else (rft, "-")
    print(f"| {summary['samples_verified']} | {summary['statuses']} | {pools[0]} | {pools[1]} |")


if __name__ == "__main__":
    main()
