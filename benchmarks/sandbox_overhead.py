"""What the sandbox costs: warm `verify-batch` throughput with the sandbox on and off, side by side in one run.

    python benchmarks/sandbox_overhead.py --backend cpu --copies 16 --workers 2 --rounds 3 --json sandbox.json
    python benchmarks/sandbox_overhead.py --backend cuda --kernelbench-dir .kb --candidates benchmarks/candidates/cuda \
        --limit 48 --max-input-mb 64 --workers 14 --rounds 2 --json sandbox.json

The manifest: on `cpu`, `--copies` copies of each CPU example (`examples/candidates/*_cpu.py` against its task in
`examples/tasks/`); on `cuda`, the first `--limit` golden candidates at sizes shrunk to `--max-input-mb` (as
`benchmarks/throughput.py` shrinks them). One `verify-batch` run with the sandbox on fills the build cache (not
counted); then each round runs the whole manifest once with the sandbox on (`MUSACODER_SANDBOX` unset) and once off
(`MUSACODER_SANDBOX=0`), in alternating order, each in a fresh process on the same filled cache. Reported per mode:
median verdicts/min over the rounds, and the ratio on/off (the issue's goal: within 10 %). Each run's wall time
includes its process start (fork server, sandbox probe), so a long-lived verifier pays less than this shows.
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

REPO = Path(__file__).resolve().parents[1]


def cpu_manifest(copies: int) -> list[dict]:
    rows = []
    for cand in sorted((REPO / "examples" / "candidates").glob("*_cpu.py")):
        task = REPO / "examples" / "tasks" / f"{cand.stem.removesuffix('_cpu')}.py"
        if task.exists():
            rows += [{"id": f"{cand.stem}#{k}", "task": str(task), "candidate": str(cand), "backend": "cpu"}
                     for k in range(copies)]
    return rows


def cuda_manifest(kb: Path, cands: Path, limit: int, max_mb: float) -> list[dict]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from throughput import runnable_pairs

    return [{"id": i, "task": str(t), "candidate": str(c), "backend": "cuda", "set": over}
            for i, t, c, over in runnable_pairs(kb, cands, max_mb, limit=limit)]


def musacoder_env(cache: Path) -> dict:
    """This environment with the checkout's `src` first on the import path (what is already there, e.g. packages
    installed with `pip --target`, kept) and `cache` as the build cache."""
    path = os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))
    return os.environ | {"MUSACODER_CACHE_DIR": str(cache), "PYTHONPATH": path}


def run_batch(manifest: Path, out: Path, workers: int, cache: Path, sandbox: bool, timing: bool = True) -> dict:
    """One `verify-batch` run in a fresh process (`timing=False`: no timing stage, for a run that only fills the
    build cache)."""
    env = musacoder_env(cache)
    if sandbox:
        env.pop("MUSACODER_SANDBOX", None)
    else:
        env["MUSACODER_SANDBOX"] = "0"
    out.unlink(missing_ok=True)
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "musacoder.cli", "verify-batch", str(manifest), "--out", str(out),
                          "--workers", str(workers), *([] if timing else ["--no-timing"])], env=env,
                         capture_output=True, text=True)
    secs = time.monotonic() - t0
    if run.returncode != 0:
        raise SystemExit(f"verify-batch failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    layers = sorted({layer for r in rows for layer in (r.get("sandbox") or [])})
    return {"seconds": secs, "verdicts": len(rows), "verdicts_per_min": 60 * len(rows) / secs, "statuses": statuses,
            "cached_builds": sum(bool(r.get("build_cached")) for r in rows), "layers": layers}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--copies", type=int, default=16, help="cpu: copies of each example candidate")
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--candidates", type=Path, default=REPO / "benchmarks" / "candidates" / "cuda")
    ap.add_argument("--limit", type=int, default=48)
    ap.add_argument("--max-input-mb", type=float, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    rows = cpu_manifest(a.copies) if a.backend == "cpu" else cuda_manifest(a.kernelbench_dir, a.candidates, a.limit,
                                                                           a.max_input_mb)
    if not rows:
        raise SystemExit("no candidates to verify (check --kernelbench-dir and --candidates)")
    work = Path(tempfile.mkdtemp(prefix="sandbox-overhead-"))
    manifest, out, cache = work / "manifest.jsonl", work / "verdicts.jsonl", work / "cache"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} verifications per run, backend {a.backend}, {a.workers} workers; filling the build cache ...")
    fill = run_batch(manifest, out, a.workers, cache, sandbox=True, timing=False)
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    for k in range(a.rounds):
        for mode in (("on", "off") if k % 2 == 0 else ("off", "on")):
            r = run_batch(manifest, out, a.workers, cache, sandbox=mode == "on")
            runs[mode].append(r)
            print(f"  round {k + 1} sandbox {mode:>3}: {r['verdicts_per_min']:7.1f} verdicts/min "
                  f"({r['seconds']:.1f} s, {r['statuses']}, {r['cached_builds']} cached builds, layers "
                  f"{','.join(r['layers']) or 'none'})")
    med = {m: statistics.median(x["verdicts_per_min"] for x in rs) for m, rs in runs.items()}
    ratio = med["on"] / med["off"] if med["off"] else None
    print("\n| sandbox | verifications per run | rounds | verdicts/min (median) | layers |")
    print("|---|---|---|---|---|")
    for m in ("on", "off"):
        print(f"| {m} | {len(rows)} | {a.rounds} | {med[m]:.1f} | {','.join(runs[m][0]['layers']) or 'none'} |")
    print(f"\non/off throughput ratio: {ratio:.3f}" if ratio else "")
    if a.json:
        a.json.write_text(json.dumps({"backend": a.backend, "workers": a.workers, "verifications": len(rows),
                                      "fill": fill, "runs": runs, "median_verdicts_per_min": med,
                                      "ratio_on_off": ratio}, indent=1))


if __name__ == "__main__":
    main()
