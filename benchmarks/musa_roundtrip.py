"""Round trip of the golden CUDA candidates through the MUSA port: port, compile through the shim, verify.

For every candidate under --candidates (default `benchmarks/candidates/cuda/level*/*.py`) whose task is in
--kernelbench-dir:

1. port it (`musacoder.port.kernelbench.port_source`): the port must be complete (no unmapped name);
2. with --compile, compile the ported sources with nvcc through the shim header, CUDA names poisoned
   (`musacoder.port.compile_check`; ~1 min per candidate on 2 cores);
3. on a GPU (skipped with --dry-run, and automatically without CUDA), verify the original with MooreEval's `cuda`
   backend and the port with its `musa` backend running on the CUDA shim (`MUSACODER_MUSA_SHIM=cuda`: `torch_musa`,
   `torch.musa` and the `musa` device stand in through `musacoder.port.shim`, the ported C++ compiles through the
   shim header); both verdicts must agree (status and correctness).

Prints a table and writes JSON:
    python benchmarks/musa_roundtrip.py --kernelbench-dir .kb --json musa_roundtrip.json [--max-input-mb 256]
        [--only 'level1/19_*'] [--compile] [--dry-run]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def candidate_pairs(kb: Path, cands: Path, only: list[str] | None):
    for c in sorted(cands.glob("level*/*.py"), key=lambda p: (p.parent.name, int(p.name.split("_")[0]))):
        key = f"{c.parent.name}/{c.stem}"
        if only and not any(fnmatch.fnmatch(key, g) for g in only):
            continue
        t = kb / c.parent.name / c.name
        yield key, (t if t.exists() else None), c


def _verdict_row(v) -> dict:
    return {"status": v.status, "correct": v.correct, "speedup_vs_eager": v.speedup_vs_eager,
            "runtime_ms": v.runtime_ms, "error": (v.error or "")[:300] or None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", ".kb")))
    ap.add_argument("--candidates", type=Path, default=HERE / "candidates" / "cuda")
    ap.add_argument("--only", action="append")
    ap.add_argument("--max-input-mb", type=float, default=1e9, help="shrink tasks above this (default: task sizes)")
    ap.add_argument("--compile", action="store_true", help="compile each port with nvcc through the shim header")
    ap.add_argument("--dry-run", action="store_true", help="port (and --compile) only; no MooreEval verification")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)

    from musacoder.port.kernelbench import port_source

    dry = a.dry_run
    if not dry:
        import torch

        if not torch.cuda.is_available():
            print("no CUDA GPU here: dry run (port and compile only)", file=sys.stderr)
            dry = True
    if not dry:
        os.environ["MUSACODER_MUSA_SHIM"] = "cuda"  # the musa backend runs on the CUDA shim (workers inherit it)
        from musacoder import verify
        from musacoder.tasks import load_task
    rows = []
    for key, task_path, cand in candidate_pairs(a.kernelbench_dir, a.candidates, a.only):
        row: dict = {"candidate": key}
        original = cand.read_text()
        try:
            ported, rep = port_source(original, key)
        except ValueError as e:
            rows.append({**row, "port": "error", "error": str(e)})
            continue
        row.update(port="complete" if rep.complete else "incomplete", rewrites=sum(rep.mapped.values()),
                   unmapped=sorted(rep.unmapped))
        if a.compile:
            from musacoder.port.compile_check import compile_ported

            res = compile_ported(ported, key)
            row.update(compile="ok" if res.ok else "failed", compile_s=round(res.seconds, 1))
            if not res.ok:
                row["compile_log"] = res.log[-1500:]
        if not dry:
            if task_path is None:
                row["verify"] = "no task file"
            else:
                over = {}
                if a.max_input_mb < 1e9:
                    sys.path.insert(0, str(HERE))
                    from throughput import shrink_overrides

                    over = shrink_overrides(task_path, int(a.max_input_mb * 2**20)) or {}
                task = load_task(task_path)
                t0 = time.perf_counter()
                v_cuda = verify(task, original, backend="cuda", overrides=over or None)
                v_musa = verify(task, ported, backend="musa", overrides=over or None)
                row.update(overrides=over, cuda=_verdict_row(v_cuda), musa_on_shim=_verdict_row(v_musa),
                           same_verdict=(v_cuda.status, v_cuda.correct) == (v_musa.status, v_musa.correct),
                           verify_s=round(time.perf_counter() - t0, 1))
        rows.append(row)
        print(json.dumps({k: row[k] for k in row if k not in ("compile_log",)}), flush=True)

    n = len(rows)
    complete = sum(r.get("port") == "complete" for r in rows)
    compiled = sum(r.get("compile") == "ok" for r in rows)
    same = sum(bool(r.get("same_verdict")) for r in rows)
    print("\n| candidates | port complete | compiled (shim) | same verdict (GPU) |\n|---|---|---|---|")
    print(f"| {n} | {complete} | {compiled if a.compile else 'not run'} | {same if not dry else 'not run (dry)'} |")
    if a.json:
        a.json.write_text(json.dumps({"dry_run": dry, "compile": a.compile, "max_input_mb": a.max_input_mb,
                                      "summary": {"candidates": n, "port_complete": complete, "compiled": compiled,
                                                  "same_verdict": same}, "rows": rows}, indent=1))
    ok = complete == n and (not a.compile or compiled == n) and (dry or same == n)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
