"""What `nvidia-smi` saw of a run's GPU memory: the device's used memory over time and each process's peak.

    nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader,nounits -lms 500 > gpu.csv &
    nvidia-smi --query-compute-apps=timestamp,pid,used_memory --format=csv,noheader,nounits -lms 500 > apps.csv &
    ... the run ...
    python benchmarks/smi_summary.py gpu.csv apps.csv [--json smi.json]

A process's figure there holds its CUDA context and everything its allocator reserved, so it is the measure to set
the verifier's admission estimates against (`musacoder.judge.slots`). The longest-lived process is the trusted one
(the verifier's own); the rest are candidates' workers, one per verification.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def read_rows(path: Path, width: int) -> list[list[str]]:
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == width and parts[-1].replace(".", "", 1).isdigit():
            rows.append(parts)
    return rows


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def summarise(gpu_csv: Path, apps_csv: Path | None) -> dict:
    used = [float(r[1]) for r in read_rows(gpu_csv, 2)]
    out: dict = {"gpu_samples": len(used)}
    if used:
        out.update(gpu_used_gib_max=round(max(used) / 1024, 2), gpu_used_gib_median=round(statistics.median(used) / 1024, 2))
    if apps_csv is not None and apps_csv.exists():
        peak: dict[str, float] = {}
        seen: dict[str, int] = {}
        for _, pid, mib in read_rows(apps_csv, 3):
            peak[pid] = max(peak.get(pid, 0.0), float(mib))
            seen[pid] = seen.get(pid, 0) + 1
        if peak:
            trusted = max(seen, key=seen.get)
            workers = [m / 1024 for p, m in peak.items() if p != trusted]
            out.update(processes=len(peak), trusted_pid=trusted, trusted_gib_max=round(peak[trusted] / 1024, 2))
            if workers:
                out.update(worker_peak_gib={"min": round(min(workers), 2), "p10": round(quantile(workers, 0.1), 2),
                                            "median": round(statistics.median(workers), 2),
                                            "p90": round(quantile(workers, 0.9), 2), "max": round(max(workers), 2)},
                           workers=len(workers))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gpu_csv", type=Path)
    ap.add_argument("apps_csv", type=Path, nargs="?")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not args.gpu_csv.exists():
        sys.exit(f"{args.gpu_csv}: no such file (the nvidia-smi log of the run)")
    s = summarise(args.gpu_csv, args.apps_csv)
    print("smi: " + ", ".join(f"{k} {v}" for k, v in s.items()))
    if args.json:
        args.json.write_text(json.dumps(s, indent=1))


if __name__ == "__main__":
    main()
