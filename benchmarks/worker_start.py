"""Worker start cost and warm verification throughput: fork server against `python -m` workers, in the same run.

    python benchmarks/worker_start.py --starts 8 --verdicts 12 --workers 2 --json worker_start.json

1. Start latency: seconds until a worker says `ready`, `--starts` workers one after another, then the same number at
   once, for each mode.
2. Warm throughput: `--verdicts` verifications of `examples/candidates/relu_cpu.py` (CPU backend, build cached by a
   first verification), `--workers` at once, for each mode; modes alternate over `--rounds` rounds so drift on a
   noisy machine hits both.
3. With `--gpu cuda:0`: GPU worker starts (CUDA context and profiler), one after another and all at once,
   with each worker's own account of where its start went.
Prints a table and writes JSON. Modes: `fork` (the default, `musacoder.judge.forkserver`) and `plain`
(`MUSACODER_FORK_SERVER=0`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPU_PARTS: list[dict] = []


def _mode(name: str) -> None:
    os.environ["MUSACODER_FORK_SERVER"] = "1" if name == "fork" else "0"


def start_seconds(cache: Path, n: int, concurrent: bool, gpu: str | None = None) -> list[float]:
    """Seconds until each worker is ready. With `gpu`, workers are started as for a GPU verification (toolchain
    variables, CUDA context and profiler before `ready`), and each worker's own account of its start is
    kept in GPU_PARTS."""
    from musacoder.judge.sandbox import Sandbox

    env = {}
    if gpu:
        from musacoder.build.cache import toolchain_env

        env = {**toolchain_env(gpu), "MUSACODER_PREWARM_DEVICE": gpu}

    def one(_):
        t0 = time.monotonic()
        with Sandbox(cache, env=env) as sb:
            GPU_PARTS.append(sb.start_report)
            return time.monotonic() - t0

    if not concurrent:
        return [one(i) for i in range(n)]
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


def warm_throughput(cache: Path, n: int, workers: int) -> float:
    from musacoder.config import VerifyConfig
    from musacoder.judge.batch import VerifyJob, verify_many
    from musacoder.tasks import load_task

    task = load_task(ROOT / "examples/tasks/relu.py")
    cand = (ROOT / "examples/candidates/relu_cpu.py").read_text()
    cfg = VerifyConfig(cache_dir=cache, repeats=5, max_repeats=20, time_budget_s=0.5)
    jobs = [VerifyJob(str(i), task, cand, "cpu") for i in range(n)]
    t0 = time.monotonic()
    statuses = [v.status for _, v in verify_many(jobs, workers=workers, config=cfg)]
    secs = time.monotonic() - t0
    bad = [s for s in statuses if s != "ok"]
    if bad:
        raise SystemExit(f"warm verifications failed: {bad}")
    return 60 * n / secs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--verdicts", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--gpu", default=None, help="also start workers for this GPU (e.g. cuda:0): --starts one after "
                    "another and --starts at once per mode, with each worker's account of its start")
    a = ap.parse_args()
    from musacoder.judge.forkserver import FORK_SERVERS

    if a.gpu:
        gpu_res = {}
        for m in ("fork", "plain"):
            _mode(m)
            FORK_SERVERS.clear()
            start_seconds(Path(tempfile.mkdtemp()), 1, False, a.gpu)  # the server's own start is not counted
            row = {}
            for how in ("sequential", "concurrent"):
                GPU_PARTS.clear()
                walls = start_seconds(Path(tempfile.mkdtemp()), a.starts, how == "concurrent", a.gpu)
                parts = {k: statistics.median(p.get(k, 0.0) for p in GPU_PARTS) for k in GPU_PARTS[0]}
                row[how] = {"ready_median_s": statistics.median(walls), "ready_max_s": max(walls),
                            "worker_parts_median_s": parts}
                print(f"gpu {m:5s} {how:10s}: ready median {row[how]['ready_median_s']:.2f} s, max "
                      f"{row[how]['ready_max_s']:.2f} s; parts {({k: round(x, 3) for k, x in parts.items()})}",
                      flush=True)
            gpu_res[m] = row
        FORK_SERVERS.clear()
        if a.json:
            a.json.with_suffix(".gpu.json").write_text(json.dumps(gpu_res, indent=1))

    if not a.verdicts:
        return
    cache = Path(tempfile.mkdtemp(prefix="mc-worker-start-"))
    _mode("plain")
    warm_throughput(cache, 1, 1)  # builds relu_cpu once: every later verification loads it from the cache
    res: dict = {m: {"sequential_s": [], "concurrent_s": [], "verdicts_per_min": []} for m in ("fork", "plain")}
    for r in range(a.rounds):
        for m in (("fork", "plain") if r % 2 == 0 else ("plain", "fork")):
            _mode(m)
            FORK_SERVERS.clear()  # each round pays its server's start, as a fresh batch would
            res[m]["sequential_s"] += start_seconds(cache, a.starts, False)
            res[m]["concurrent_s"] += start_seconds(cache, a.starts, True)
            res[m]["verdicts_per_min"].append(warm_throughput(cache, a.verdicts, a.workers))
            print(f"round {r} {m:5s}: {res[m]['verdicts_per_min'][-1]:.1f} verdicts/min", flush=True)
    FORK_SERVERS.clear()
    summary = {m: {"start_median_s": statistics.median(x["sequential_s"]), "start_max_s": max(x["sequential_s"]),
                   f"start_{a.starts}_at_once_median_s": statistics.median(x["concurrent_s"]),
                   "verdicts_per_min": statistics.fmean(x["verdicts_per_min"])} for m, x in res.items()}
    print(f"\n| mode | start median s (max) | {a.starts} at once, median s | warm verdicts/min ({a.workers} workers) |")
    print("|---|---|---|---|")
    for m, x in summary.items():
        print(f"| {m} | {x['start_median_s']:.3f} ({x['start_max_s']:.2f}) | "
              f"{x[f'start_{a.starts}_at_once_median_s']:.3f} | {x['verdicts_per_min']:.1f} |")
    ratio = summary["fork"]["verdicts_per_min"] / summary["plain"]["verdicts_per_min"]
    print(f"fork / plain warm throughput: {ratio:.2f}x")
    if a.json:
        a.json.write_text(json.dumps({"args": vars(a) | {"json": str(a.json)}, "raw": res, "summary": summary,
                                      "ratio": ratio, "cpus": os.cpu_count()}, indent=1))


if __name__ == "__main__":
    main()
