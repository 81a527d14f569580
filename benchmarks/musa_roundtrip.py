"""Round trip of the golden CUDA candidates through the MUSA port: port, compile through the shim, verify.

For every candidate under --candidates (default `benchmarks/candidates/cuda/level*/*.py`) whose task is in
--kernelbench-dir:

1. port it (`musacoder.port.kernelbench.port_source`): the port must be complete (no unmapped name);
2. with --compile, compile the ported sources with nvcc through the shim header, CUDA names poisoned
   (`musacoder.port.compile_check`; `--compile-batch` candidates to one translation unit, since torch's headers
   are most of the cost: ~1.5 min per batch of 12 on 2 cores, a failed batch compiled again one by one);
3. on a GPU (skipped with --dry-run, and automatically without CUDA), verify the original with MooreEval's `cuda`
   backend and the port with its `musa` backend running on the CUDA shim (`MUSACODER_MUSA_SHIM=cuda`: `torch_musa`,
   `torch.musa` and the `musa` device stand in through `musacoder.port.shim`, the ported C++ compiles through the
   shim header); both verdicts must agree (status and correctness). `--no-timing` skips both sides' timing stage
   (the agreement asked for is on status and correctness, which the timing stage does not decide).

Prints a table and writes JSON:
    python benchmarks/musa_roundtrip.py --kernelbench-dir .kb --json musa_roundtrip.json [--max-input-mb 256]
        [--only 'level1/19_*'] [--limit N] [--workers 8] [--log verdicts.jsonl] [--compile [--compile-batch 12]]
        [--dry-run] [--no-timing]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
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


def _verify_all(items: list, a) -> None:
    """Verify each original (`cuda`) and its port (`musa` on the CUDA shim) with `--workers` verifications in flight;
    verdicts are appended to `--log` as they come and a rerun skips the ones already there."""
    from musacoder.judge.batch import VerifyJob, verify_many
    from musacoder.config import VerifyConfig
    from musacoder.tasks import load_task

    sys.path.insert(0, str(HERE))
    from throughput import append_log, read_log, shrink_overrides

    done = read_log(a.log)
    jobs = []
    for row, task_path, original, ported in items:
        over = {}
        if a.max_input_mb < 1e9:
            over = shrink_overrides(task_path, int(a.max_input_mb * 2**20)) or {}
        row["overrides"] = over
        task = load_task(task_path)
        for backend, code in (("cuda", original), ("musa", ported)):
            jid = f"{row['candidate']}#{backend}"
            if jid not in done:
                jobs.append(VerifyJob(jid, task, code, backend, over))
    for job, v in verify_many(jobs, workers=a.workers, config=VerifyConfig(time_candidate=not a.no_timing)):
        done[job.id] = v
        append_log(a.log, job.id, v)
        print(f"  {job.id:60s} {v.status:12s} wall {v.wall_s:6.1f}s", flush=True)
    for row, *_ in items:
        v_cuda, v_musa = done.get(f"{row['candidate']}#cuda"), done.get(f"{row['candidate']}#musa")
        if v_cuda is None or v_musa is None:
            continue
        row.update(cuda=_verdict_row(v_cuda), musa_on_shim=_verdict_row(v_musa),
                   same_verdict=(v_cuda.status, v_cuda.correct) == (v_musa.status, v_musa.correct))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", ".kb")))
    ap.add_argument("--candidates", type=Path, default=HERE / "candidates" / "cuda")
    ap.add_argument("--only", action="append")
    ap.add_argument("--max-input-mb", type=float, default=1e9, help="shrink tasks above this (default: task sizes)")
    ap.add_argument("--compile", action="store_true", help="compile each port with nvcc through the shim header")
    ap.add_argument("--compile-batch", type=int, default=12,
                    help="ported candidates per translation unit (a failed batch is compiled again one by one)")
    ap.add_argument("--dry-run", action="store_true", help="port (and --compile) only; no MooreEval verification")
    ap.add_argument("--limit", type=int, default=0, help="first N candidates only (0: all)")
    ap.add_argument("--workers", type=int, default=8, help="verifications in flight (GPU)")
    ap.add_argument("--log", type=Path, default=None, help="append each verdict to this JSONL; a rerun resumes it")
    ap.add_argument("--no-timing", action="store_true", help="skip the timing stage on both sides")
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
    rows, to_verify, to_compile = [], [], []
    for key, task_path, cand in candidate_pairs(a.kernelbench_dir, a.candidates, a.only):
        if a.limit and len(rows) >= a.limit:
            break
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
            to_compile.append((row, ported))
        if not dry:
            if task_path is None:
                row["verify"] = "no task file"
            else:
                to_verify.append((row, task_path, original, ported))
        rows.append(row)
        if dry and not a.compile:
            print(json.dumps(row), flush=True)
    if to_compile:
        from musacoder.port.compile_check import compile_ported_many

        got = compile_ported_many([(r["candidate"], text) for r, text in to_compile], batch=a.compile_batch,
                                  progress=lambda k, n: print(f"compiled {k}/{n}", file=sys.stderr, flush=True))
        for row, _ in to_compile:
            res = got[row["candidate"]]
            row.update(compile="ok" if res.ok else "failed", compile_s=round(res.seconds, 1))
            if not res.ok:
                row["compile_log"] = res.log[-1500:]
            if dry:
                print(json.dumps({k: row[k] for k in row if k != "compile_log"}), flush=True)
    if to_verify:
        _verify_all(to_verify, a)

    n = len(rows)
    complete = sum(r.get("port") == "complete" for r in rows)
    compiled = sum(r.get("compile") == "ok" for r in rows)
    same = sum(bool(r.get("same_verdict")) for r in rows)
    print("\n| candidates | port complete | compiled (shim) | same verdict (GPU) |\n|---|---|---|---|")
    print(f"| {n} | {complete} | {compiled if a.compile else 'not run'} | {same if not dry else 'not run (dry)'} |")
    if a.json:
        a.json.write_text(json.dumps({"dry_run": dry, "compile": a.compile, "max_input_mb": a.max_input_mb,
                                      "timing": not a.no_timing,
                                      "summary": {"candidates": n, "port_complete": complete, "compiled": compiled,
                                                  "same_verdict": same}, "rows": rows}, indent=1))
    ok = complete == n and (not a.compile or compiled == n) and (dry or same == n)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
