"""Build latency of candidates, cold caches, one build at a time, modes alternated per candidate:

- `exact`: the sources as written, plain nvcc (what `load_inline` does);
- `serial`: musacoder's light headers (lite/slim tiers), plain nvcc;
- `fast`: light headers and the parallel nvcc driver (`musacoder/build/nvcc_parallel.py`), the default;
- `inworker`: as `fast`, but built in the candidate's worker itself rather than by the build broker's separate
  builder (`MUSACODER_BUILD_BROKER=0`): what the broker costs.

    python benchmarks/build_latency.py --candidates benchmarks/candidates/cuda --kernelbench-dir ../shared/kernelbench \
        --limit 3 --modes exact,serial,fast --json build_latency.json

Every mode runs the same candidates through MooreEval's build stage with a fresh cache each, in the same run; on a
machine without a GPU the verdict stops after the build (compile check), which is all this needs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path


def build_steps(cache: Path) -> dict[str, float]:
    """Seconds of each unit of the last successful build under `cache` (ninja's log: `main.o`, the `.cu` object,
    the link) and, with the parallel nvcc driver, of the `.cu`'s parts (host and device front ends, final host
    compile)."""
    out: dict[str, float] = {}
    logs = sorted(cache.glob("ext/*/*/*/.ninja_log"), key=lambda p: p.stat().st_mtime)
    if logs:
        for line in logs[-1].read_text().splitlines()[1:]:
            f = line.split("\t")
            if len(f) >= 4:
                out[f[3]] = round((int(f[1]) - int(f[0])) / 1000, 2)
        for j in logs[-1].parent.glob("*.steps.json"):
            out.update({f"cu.{k}": x for k, x in json.loads(j.read_text()).items()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", type=Path, default=Path("benchmarks/candidates/cuda"))
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--modes", default="exact,fast", help="comma-separated: exact, serial, fast, inworker")
    ap.add_argument("--every", type=int, default=1, help="take every N-th candidate (a spread of tasks)")
    ap.add_argument("--max-input-mb", type=float, default=64, help="task sizes shrunk as in throughput.py: on a GPU "
                    "the verdict also runs one correctness trial, which at full size (GBs) took longer than the build")
    a = ap.parse_args()
    modes = [m for m in a.modes.split(",") if m]
    # (light headers, parallel nvcc, build broker)
    env_of = {"exact": ("0", "0", "1"), "serial": ("1", "0", "1"), "fast": ("1", "1", "1"), "inworker": ("1", "1", "0")}

    from musacoder.config import VerifyConfig
    from musacoder.judge.pipeline import verify
    from musacoder.tasks import load_task

    sys.path.insert(0, str(Path(__file__).parent))
    from throughput import runnable_pairs  # noqa: E402  (sibling script)

    rows = []
    for name, path, c, over in runnable_pairs(a.kernelbench_dir, a.candidates, a.max_input_mb, a.every, a.limit):
        task = load_task(path, over)
        row = {"candidate": name}
        for mode in modes:  # alternate per candidate so drift hits every mode alike
            (os.environ["MUSACODER_FAST_BUILD"], os.environ["MUSACODER_PARALLEL_NVCC"],
             os.environ["MUSACODER_BUILD_BROKER"]) = env_of[mode]
            cfg = VerifyConfig(cache_dir=Path(tempfile.mkdtemp(prefix=f"mc-{mode}-")), time_candidate=False, trials=1)
            v = verify(task, c.read_text(), backend="cuda", config=cfg)
            row[f"{mode}_s"] = v.build_s
            row[f"{mode}_compiled"] = v.compiled
            row[f"{mode}_steps"] = steps = build_steps(cfg.cache_dir)
            print(f"{row['candidate']:50s} {mode:8s} compiled={v.compiled} build {v.build_s:.1f} s  steps {steps}",
                  flush=True)
        rows.append(row)
    ok = [r for r in rows if all(r[f"{m}_compiled"] for m in modes)]
    summary = {m: {"median_s": statistics.median(r[f"{m}_s"] for r in ok), "max_s": max(r[f"{m}_s"] for r in ok)}
               for m in modes} if ok else {}
    print("\n| mode | candidates | median build s | max build s |\n|---|---|---|---|")
    for m, s in summary.items():
        print(f"| {m} | {len(ok)} | {s['median_s']:.1f} | {s['max_s']:.1f} |")
    for m in modes[1:]:
        if ok:
            print(f"{m}/{modes[0]} median ratio: {summary[m]['median_s'] / summary[modes[0]]['median_s']:.2f}")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
