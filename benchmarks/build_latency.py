"""Build latency of candidates, exact `load_inline` build vs musacoder's fast build (slim headers first), cold caches.

    python benchmarks/build_latency.py --candidates benchmarks/candidates/cuda --kernelbench-dir ../shared/kernelbench \
        --limit 3 --json build_latency.json

Both modes run the same candidates through MooreEval's build stage with a fresh cache each, in the same run, one
build at a time; on a machine without a GPU the verdict stops after the build (compile check), which is all this needs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", type=Path, default=Path("benchmarks/candidates/cuda"))
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--limit", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()

    from musacoder.config import VerifyConfig
    from musacoder.judge.pipeline import verify
    from musacoder.tasks import load_task

    cands = sorted(a.candidates.glob("level*/*.py"))[: a.limit]
    rows = []
    for c in cands:
        task = load_task(a.kernelbench_dir / c.parent.name / c.name)
        row = {"candidate": f"{c.parent.name}/{c.stem}"}
        for mode in ("exact", "fast"):  # alternate per candidate so drift hits both alike
            os.environ["MUSACODER_FAST_BUILD"] = "1" if mode == "fast" else "0"
            cfg = VerifyConfig(cache_dir=Path(tempfile.mkdtemp(prefix=f"mc-{mode}-")), time_candidate=False, trials=1)
            v = verify(task, c.read_text(), backend="cuda", config=cfg)
            row[f"{mode}_s"] = v.build_s
            row[f"{mode}_compiled"] = v.compiled
            print(f"{row['candidate']:50s} {mode:5s} compiled={v.compiled} build {v.build_s:.1f} s", flush=True)
        rows.append(row)
    ok = [r for r in rows if r["exact_compiled"] and r["fast_compiled"]]
    summary = {m: {"median_s": statistics.median(r[f"{m}_s"] for r in ok), "max_s": max(r[f"{m}_s"] for r in ok)} for m in ("exact", "fast")} if ok else {}
    print("\n| mode | candidates | median build s | max build s |\n|---|---|---|---|")
    for m, s in summary.items():
        print(f"| {m} | {len(ok)} | {s['median_s']:.1f} | {s['max_s']:.1f} |")
    if ok:
        print(f"fast/exact median ratio: {summary['fast']['median_s'] / summary['exact']['median_s']:.2f}")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
