"""MooreEval beside KernelBench's own harness, in one run: verdicts per minute, cold and warm build caches.

    python benchmarks/anchor.py --kernelbench-dir ../shared/kernelbench --candidates benchmarks/candidates/cuda \
        --workers 14 --limit 4 --json anchor.json [--only 'level1/*,level2/12_*'] [--phases cold,warm] \
        [--timeout 300] [--work DIR] [--dry-run]

Each candidate `<candidates>/levelN/<task>.py` answers `<kernelbench>/levelN/<task>.py`, at the task's shipped sizes.
Per phase (cold: both build caches emptied first; warm: the same caches again), one side after the other, so neither
has the GPU while the other runs:

1. KernelBench, as its own evaluation scripts run it: first every candidate's build at once, each in a process of its
   own calling `kernelbench.eval.build_compile_cache` into the candidate's build folder, --kb-compile-workers at a time
   (KernelBench's `compile.batch_compile`, its `num_cpu_workers`; 0: no separate builds, each evaluation builds its
   own, as this benchmark ran before). Then one fresh Python process per candidate, one after the other, calling
   `kernelbench.eval.eval_kernel_against_ref` (imported from `<kernelbench>/src`, never a dependency) with 5
   correctness trials, 100 performance trials, `measure_performance=True`, fp32, `cuda:0` and
   `build_dir=<work>/kb-cache/<candidate>`. A process running past --timeout is killed (a `timeout`). Modules that
   KernelBench imports but its evaluation never uses are stubbed in that process only when missing (UNUSED_BY_EVAL).
2. musacoder: `python -m musacoder.cli verify-batch` on a manifest of the same pairs with --workers workers and
   `MUSACODER_CACHE_DIR=<work>/mc-cache`.

A verdict is reached when KernelBench's harness returned a result or raised (its own scripts record an exception as a
failed sample), or when musacoder wrote a status other than `infra_error`. Accepted: compiled and correct
(KernelBench), status `ok` (musacoder). Per side and phase: verdicts/min over the side's whole wall time, median and
p90 seconds per verdict (KernelBench: the process's wall time; musacoder: each result's `wall_s`), and the
musacoder/KernelBench ratio of verdicts/min. KernelBench's wall time includes its parallel builds; its seconds per
verdict are the evaluation process's (each build's own seconds are `compile_s`). Both sides' speedups are compared on
the candidates both accepted: musacoder's `speedup` against KernelBench's ref_runtime / runtime, and how many of those
whose kernel ran 1 ms or more agree within 5 % (`speedups`). Prints a table, lists candidates whose correctness the
sides disagree on, and rewrites --json after every candidate, so a cut run keeps what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from sandbox_overhead import musacoder_env  # noqa: E402

CORRECT_TRIALS, PERF_TRIALS = 5, 100  # what KernelBench's evaluation scripts pass (the function's own are 1 and 10)
# Modules KernelBench imports at module level only for its LLM clients, HTTP fetches and progress bars (eval.py:
# requests; utils.py, which kernelbench/__init__.py imports: dotenv, openai, litellm, tqdm). eval_kernel_against_ref
# calls none of them; the GPU image lacks some and cannot install any, so the child stubs those that are missing.
UNUSED_BY_EVAL = ("requests", "dotenv", "openai", "litellm", "tqdm")
KB_ERROR_KEYS = (
    "compilation_error", "runtime_error", "correctness_issue", "max_difference", "error_during_performance")


# --- KernelBench's side: the child process ---------------------------------------------------------------------------

def _stub_attr(module: str, attr: str):
    if attr.startswith("__"):
        raise AttributeError(attr)
    if (module, attr) == ("dotenv", "load_dotenv"):
        return lambda *_a, **_k: False  # utils.py calls it at import; an .env file plays no part in evaluation

    def unavailable(*_a, **_k):
        raise RuntimeError(f"{module}.{attr} is a stub: {module} is not installed here")
    return unavailable


def stub_unused_modules() -> list[str]:
    """Put a stub in sys.modules for each module of UNUSED_BY_EVAL that is not installed; returns their names."""
    import importlib.machinery
    import importlib.util
    import types

    stubbed = []
    for name in UNUSED_BY_EVAL:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            mod = types.ModuleType(name, f"Stub: {name} is not installed; KernelBench's evaluation does not use it.")
            mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
            mod.__getattr__ = lambda attr, name=name: _stub_attr(name, attr)
            sys.modules[name] = mod
            stubbed.append(name)
    return stubbed


def kernelbench_child(kb_dir: Path, task: Path, candidate: Path, build_dir: Path, result: Path) -> None:
    """Run one candidate through eval_kernel_against_ref and write its outcome to `result` (JSON)."""
    sys.path.insert(0, str(kb_dir.resolve() / "src"))
    out: dict = {"stubbed": stub_unused_modules()}
    import torch
    from kernelbench.eval import eval_kernel_against_ref

    t0 = time.monotonic()
    try:
        r = eval_kernel_against_ref(task.read_text(), candidate.read_text(), num_correct_trials=CORRECT_TRIALS,
                                    num_perf_trials=PERF_TRIALS, measure_performance=True, build_dir=str(build_dir),
                                    device=torch.device("cuda:0"), backend="cuda", precision=torch.float32)
    except Exception as e:  # noqa: BLE001 - the harness's own exceptions are part of what is measured
        out |= {"outcome": "raised", "error": f"{type(e).__name__}: {e}"}
    else:
        if r is None:  # its answer to a build-lock error: "retry"
            out |= {"outcome": "retry", "error": "eval_kernel_against_ref returned None (build lock error)"}
        else:
            outcome = "accepted" if r.compiled and r.correctness else "incorrect" if r.compiled else "compile_error"
            error = "; ".join(f"{k}: {r.metadata[k]}" for k in KB_ERROR_KEYS if k in r.metadata)
            # KernelExecResult's comments say "us"; timing.py measures milliseconds
            out |= {"outcome": outcome, "compiled": r.compiled, "correctness": r.correctness,
                    "runtime_ms": r.runtime if r.runtime >= 0 else None,  # -1: not timed
                    "ref_runtime_ms": r.ref_runtime if r.ref_runtime >= 0 else None,
                    "excessive_speedup": bool(r.metadata.get("excessive_speedup")), "error": error}
    out["eval_s"] = round(time.monotonic() - t0, 3)
    result.write_text(json.dumps(out, default=str))


def kernelbench_compile_child(kb_dir: Path, candidate: Path, build_dir: Path, result: Path) -> None:
    """Build one candidate into `build_dir` as KernelBench's parallel pre-build does (`build_compile_cache`); the
    evaluation that follows loads it from there."""
    sys.path.insert(0, str(kb_dir.resolve() / "src"))
    stub_unused_modules()
    from kernelbench.eval import build_compile_cache

    t0 = time.monotonic()
    try:
        ok, _, err = build_compile_cache(candidate.read_text(), verbose=False, build_dir=str(build_dir))
    except Exception as e:  # noqa: BLE001 - its scripts record the exception as a failed build
        ok, err = False, f"{type(e).__name__}: {e}"
    result.write_text(json.dumps({"compiled": bool(ok), "error": (err or "")[-400:],
                                  "compile_s": round(time.monotonic() - t0, 3)}))


# --- KernelBench's side: the parent ----------------------------------------------------------------------------------

def kernelbench_command(a, task: Path, cand: Path, build_dir: Path, result: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--kb-child", str(task), str(cand), str(build_dir),
            str(result), "--kernelbench-dir", str(a.kernelbench_dir.resolve())]


def compile_command(a, cand: Path, build_dir: Path, result: Path) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--kb-compile", str(cand), str(build_dir), str(result),
            "--kernelbench-dir", str(a.kernelbench_dir.resolve())]


def compile_kernelbench_candidates(a, items: list[tuple], cache: Path) -> dict:
    """Every candidate's build at once, --kb-compile-workers at a time, each in a process of its own (killed at
    --timeout); per id: compiled, error, compile_s."""
    def one(item) -> tuple[str, dict]:
        pid, _, cand = item
        name = pid.replace("/", "__")
        result = cache / f"{name}.compile.json"
        result.unlink(missing_ok=True)
        t0 = time.monotonic()
        rc, tail = run_process(compile_command(a, cand, cache / name, result), a.timeout)
        if result.exists():
            return pid, json.loads(result.read_text())
        why = f"killed after {a.timeout:g} s" if rc is None else f"exit {rc}: {tail[-300:]}"
        return pid, {"compiled": False, "error": why, "compile_s": round(time.monotonic() - t0, 3)}

    with ThreadPoolExecutor(max_workers=max(1, a.kb_compile_workers)) as pool:
        return dict(pool.map(one, items))


def run_process(cmd: list[str], timeout: float, env: dict | None = None,
                log: Path | None = None) -> tuple[int | None, str]:
    """Run `cmd` in its own process group, killed at `timeout` seconds (exit code None) or when this run is interrupted;
    whatever it left running (builds, idle workers) is killed too. Returns the exit code and the output's last 2,000
    characters (all of it goes to `log` when given)."""
    with open(log, "w") if log else contextlib.nullcontext(subprocess.PIPE) as sink:
        p = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        try:
            text, rc = p.communicate(timeout=timeout)[0], p.returncode
        except subprocess.TimeoutExpired:
            text, rc = None, None
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if rc is None:
            text = p.communicate()[0]
    text = log.read_text(errors="replace") if log else text or ""
    return rc, text[-2000:]


def run_kernelbench_candidate(a, pid: str, task: Path, cand: Path, cache: Path) -> dict:
    name = pid.replace("/", "__")
    result = cache / f"{name}.result.json"
    result.unlink(missing_ok=True)
    t0 = time.monotonic()
    rc, tail = run_process(kernelbench_command(a, task, cand, cache / name, result), a.timeout)
    rec = {"wall_s": round(time.monotonic() - t0, 3), "exit_code": rc}
    if result.exists():
        rec |= json.loads(result.read_text())
    elif rc is None:
        rec |= {"outcome": "timeout", "error": f"killed after {a.timeout:g} s"}
    else:
        rec |= {"outcome": "crashed", "error": f"exit {rc}: {tail}"}
    rec["error"] = (rec.get("error") or "")[-400:]
    rec["verdict"] = rec["outcome"] in ("accepted", "incorrect", "compile_error", "raised")
    rec["accepted"] = rec["outcome"] == "accepted"
    rec["correct"] = rec["accepted"] if rec["verdict"] else None
    return rec


# --- musacoder's side ------------------------------------------------------------------------------------------------

def write_manifest(items: list[tuple], path: Path) -> Path:
    path.write_text("".join(json.dumps({"id": i, "task": str(t), "candidate": str(c), "backend": "cuda"}) + "\n"
                            for i, t, c in items))
    return path


def musacoder_command(a, manifest: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "musacoder.cli", "verify-batch", str(manifest), "--out", str(out),
            "--workers", str(a.workers)]




def run_musacoder(a, items: list[tuple], work: Path, phase: str) -> tuple[dict, float]:
    """verify-batch over the pairs (the whole batch may take --timeout per candidate); records by id, wall seconds."""
    out = work / f"musacoder-{phase}.jsonl"
    out.unlink(missing_ok=True)  # verify-batch skips ids already in --out
    cmd = musacoder_command(a, write_manifest(items, work / "manifest.jsonl"), out)
    t0 = time.monotonic()
    rc, tail = run_process(cmd, a.timeout * len(items), env=musacoder_env(work / "mc-cache"),
                           log=work / f"musacoder-{phase}.log")
    wall = time.monotonic() - t0
    lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()] if out.exists() else []
    recs = {}
    for v in lines:
        why = v.get("error") or "; ".join(v.get("violations") or [])
        recs[v["id"]] = {"outcome": v["status"], "wall_s": v.get("wall_s"), "reward": v.get("reward"),
                         "speedup": v.get("speedup"), "runtime_ms": v.get("runtime_ms"),
                         "ref_runtime_ms": v.get("ref_runtime_ms"), "error": why[-400:],
                         "verdict": v["status"] != "infra_error", "accepted": v["status"] == "ok",
                         "correct": v.get("correct"), "stage_s": v.get("stage_s") or {}}
    for i, _, _ in items:
        if i not in recs:
            recs[i] = {"outcome": "missing", "wall_s": None, "verdict": False, "accepted": False, "correct": None,
                       "error": f"no result line (verify-batch exit {rc}): {tail[-300:]}"}
    return recs, wall


# --- the run ---------------------------------------------------------------------------------------------------------

def pairs(kb: Path, cands: Path, only: str, limit: int) -> list[tuple[str, Path, Path]]:
    """(id, task, candidate) for each candidate whose task exists, id = `levelN/<stem>`, filtered by comma-separated
    globs on the id, at most `limit` (0: all)."""
    globs = [g.strip() for g in only.split(",") if g.strip()] or ["*"]
    out = []
    for c in sorted(cands.glob("level*/*.py")):
        pid, t = f"{c.parent.name}/{c.stem}", kb / c.parent.name / c.name
        if t.exists() and any(fnmatch.fnmatch(pid, g) for g in globs):
            out.append((pid, t.resolve(), c.resolve()))
    return out[:limit] if limit else out


def percentile(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return xs[max(0, math.ceil(q * len(xs)) - 1)] if xs else None


def summarize(recs: dict, wall_s: float) -> dict:
    walls = [r["wall_s"] for r in recs.values() if r["verdict"] and r["wall_s"] is not None]
    verdicts = sum(r["verdict"] for r in recs.values())
    return {"candidates": len(recs), "verdicts": verdicts, "accepted": sum(r["accepted"] for r in recs.values()),
            "wall_s": round(wall_s, 2), "verdicts_per_min": round(60 * verdicts / wall_s, 2) if wall_s else None,
            "median_s": round(statistics.median(walls), 3) if walls else None, "p90_s": percentile(walls, 0.9),
            "outcomes": {o: sum(r["outcome"] == o for r in recs.values())
                         for o in sorted({r["outcome"] for r in recs.values()})}}


def disagreements(kb: dict, mc: dict) -> list[dict]:
    """Candidates both sides judged whose correctness they see differently (musacoder's `correct` stays false when it
    stops before correctness, e.g. `illegal`: its status is given)."""
    return [{"id": i, "kernelbench_correct": kb[i]["correct"], "musacoder_correct": mc[i]["correct"],
             "musacoder_status": mc[i]["outcome"]}
            for i in kb if kb[i]["verdict"] and mc[i]["verdict"] and bool(kb[i]["correct"]) != bool(mc[i]["correct"])]


SPEEDUP_AGREE, SPEEDUP_MIN_MS = 0.05, 1.0  # the bar: within 5 % on kernels of 1 ms or more


def speedup_pairs(kb: dict, mc: dict) -> dict:
    """Both sides' speedups on the candidates both accepted and timed: KernelBench's is ref_runtime / runtime (its
    eager reference and the candidate, 100 runs each), musacoder's its verdict's `speedup`. `rel` = musacoder's /
    KernelBench's - 1. Summary over the kernels that ran SPEEDUP_MIN_MS or more on KernelBench's side."""
    rows = []
    for i in kb:
        k, m = kb[i], mc.get(i, {})
        if not (k.get("accepted") and m.get("accepted") and k.get("runtime_ms") and k.get("ref_runtime_ms")
                and m.get("speedup")):
            continue
        ks = k["ref_runtime_ms"] / k["runtime_ms"]
        rows.append({"id": i, "runtime_ms": k["runtime_ms"], "kernelbench": round(ks, 4),
                     "musacoder": round(m["speedup"], 4), "rel": round(m["speedup"] / ks - 1, 4)})
    long = [r for r in rows if r["runtime_ms"] >= SPEEDUP_MIN_MS]
    return {"rows": rows, "compared": len(long),
            "within": sum(abs(r["rel"]) <= SPEEDUP_AGREE for r in long),
            "max_abs_rel": max((abs(r["rel"]) for r in long), default=None)}


def fmt(x, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def print_table(report: dict) -> None:
    print("\n| phase | side | candidates | verdicts | accepted | wall s | verdicts/min | median s | p90 s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for phase, r in report["phases"].items():
        for side in ("kernelbench", "musacoder"):
            if s := r.get(side, {}).get("summary"):
                print(f"| {phase} | {side} | {s['candidates']} | {s['verdicts']} | {s['accepted']} | "
                      f"{s['wall_s']:.1f} | {fmt(s['verdicts_per_min'])} | {fmt(s['median_s'])} | {fmt(s['p90_s'])} |")
    for phase, r in report["phases"].items():
        for d in r.get("disagree", []):
            print(f"disagree ({phase}): {d['id']}: KernelBench correct={d['kernelbench_correct']}, "
                  f"musacoder correct={d['musacoder_correct']} ({d['musacoder_status']})")
    for phase, r in report["phases"].items():
        if sp := r.get("speedups"):
            print(f"speedups ({phase}): {sp['within']} of {sp['compared']} kernels of >= {SPEEDUP_MIN_MS:g} ms agree "
                  f"within {SPEEDUP_AGREE:.0%} (largest difference {fmt(sp['max_abs_rel'], '.1%')})")
            for row in sp["rows"]:
                print(f"  {row['id']:45s} {row['runtime_ms']:8.3f} ms  KernelBench {row['kernelbench']:.3f}  "
                      f"musacoder {row['musacoder']:.3f}  ({row['rel']:+.1%})")
    ratios = [f"{p} {r['ratio_verdicts_per_min']:.2f}x" for p, r in report["phases"].items()
              if r.get("ratio_verdicts_per_min") is not None]
    print("musacoder/KernelBench verdicts/min: " + (", ".join(ratios) or "-"))


def dry_run(a, items: list[tuple], work: Path, phases: list[str]) -> None:
    manifest = write_manifest(items, work / "manifest.jsonl")
    print(f"{len(items)} pairs; manifest {manifest}:")
    print(manifest.read_text(), end="")
    for phase in phases:
        cache = work / "kb-cache"
        state = "emptied first" if phase == "cold" else "reused"
        print(f"== {phase}: KernelBench, one process each (build cache {cache}, {state})")
        if a.kb_compile_workers:
            print(f"  first the builds, {a.kb_compile_workers} at a time:")
            for pid, _, c in items:
                name = pid.replace("/", "__")
                print("  " + shlex.join(compile_command(a, c, cache / name, cache / f"{name}.compile.json")))
        for pid, t, c in items:
            name = pid.replace("/", "__")
            print("  " + shlex.join(kernelbench_command(a, t, c, cache / name, cache / f"{name}.result.json")))
        print(f"== {phase}: musacoder")
        print(f"  MUSACODER_CACHE_DIR={work / 'mc-cache'} PYTHONPATH={musacoder_env(work)['PYTHONPATH']} "
              + shlex.join(musacoder_command(a, manifest, work / f"musacoder-{phase}.jsonl")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernelbench-dir", type=Path,
                    default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")),
                    help="task files under levelN/, KernelBench's harness under src/kernelbench/")
    ap.add_argument("--candidates", type=Path, default=Path("benchmarks/candidates/cuda"))
    ap.add_argument("--limit", type=int, default=0, help="first N pairs after --only (0: all)")
    ap.add_argument("--only", default="*", help="comma-separated globs on the id `levelN/<task stem>`")
    ap.add_argument("--workers", type=int, default=4, help="musacoder's verifications in flight")
    ap.add_argument("--phases", default="cold,warm", help="cold and/or warm, in order; warm alone needs --work")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per KernelBench process (musacoder's batch: "
                    "this times the number of candidates)")
    ap.add_argument("--work", type=Path, default=None, help="caches, manifest, results (default: a fresh temporary "
                    "folder, removed at the end)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--dry-run", action="store_true", help="write the manifest, print the pairs and commands, exit")
    ap.add_argument("--kb-compile-workers", type=int, default=os.cpu_count() or 1,
                    help="KernelBench's builds at once before its evaluations, as its scripts do (default: the "
                    "host's cores; 0: each evaluation builds its own candidate)")
    ap.add_argument("--kb-compile", nargs=3, metavar=("CANDIDATE", "BUILD_DIR", "RESULT"), type=Path,
                    help=argparse.SUPPRESS)
    ap.add_argument("--kb-child", nargs=4, metavar=("TASK", "CANDIDATE", "BUILD_DIR", "RESULT"), type=Path,
                    help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.kb_child:
        return kernelbench_child(a.kernelbench_dir, *a.kb_child)
    if a.kb_compile:
        return kernelbench_compile_child(a.kernelbench_dir, *a.kb_compile)
    if a.kb_compile_workers < 0:
        ap.error(f"--kb-compile-workers takes 0 or more; got {a.kb_compile_workers}")
    phases = [x.strip() for x in a.phases.split(",") if x.strip()]
    if not phases or set(phases) - {"cold", "warm"}:
        ap.error(f"--phases takes cold and/or warm, comma-separated; got {a.phases!r}")
    if phases[0] == "warm" and a.work is None:
        ap.error("--phases warm needs the --work folder an earlier cold run filled")
    if not (a.kernelbench_dir / "src" / "kernelbench" / "eval.py").is_file():
        ap.error(f"{a.kernelbench_dir}/src/kernelbench/eval.py not found: --kernelbench-dir must also hold "
                 "KernelBench's src/")
    items = pairs(a.kernelbench_dir, a.candidates, a.only, a.limit)
    if not items:
        ap.error(f"no candidate under {a.candidates}/level*/ has a task in {a.kernelbench_dir} and matches "
                 f"--only {a.only!r}")
    work = (a.work or Path(tempfile.mkdtemp(prefix="anchor-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if a.dry_run:
        return dry_run(a, items, work, phases)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # from `timeout`: children are killed on the way out

    report = {"kernelbench_dir": str(a.kernelbench_dir), "candidates_dir": str(a.candidates), "workers": a.workers,
              "timeout_s": a.timeout, "kb_compile_workers": a.kb_compile_workers, "correct_trials": CORRECT_TRIALS,
              "perf_trials": PERF_TRIALS,
              "pairs": [i for i, _, _ in items], "phases": {}}

    def save():
        if a.json:
            a.json.write_text(json.dumps(report, indent=1))

    try:
        for phase in phases:
            r = report["phases"][phase] = {}
            if phase == "cold":
                for d in ("kb-cache", "mc-cache"):
                    shutil.rmtree(work / d, ignore_errors=True)
            cache = work / "kb-cache"
            cache.mkdir(exist_ok=True)
            print(f"== {phase}: KernelBench, {len(items)} candidates, one process each", flush=True)
            kb = r["kernelbench"] = {"results": {}}
            t0 = time.monotonic()
            built = {}
            if a.kb_compile_workers:
                built = kb["compile"] = compile_kernelbench_candidates(a, items, cache)
                kb["compile_wall_s"] = round(time.monotonic() - t0, 2)
                print(f"  builds: {sum(b['compiled'] for b in built.values())} of {len(built)} in "
                      f"{kb['compile_wall_s']:.1f}s, {a.kb_compile_workers} at a time", flush=True)
                save()
            for pid, t, c in items:
                rec = kb["results"][pid] = run_kernelbench_candidate(a, pid, t, c, cache)
                if pid in built:
                    rec["compile_s"] = built[pid]["compile_s"]
                kb["summary"] = summarize(kb["results"], time.monotonic() - t0)
                print(f"  {pid:45s} {rec['outcome']:13s} wall {rec['wall_s']:6.1f}s "
                      f"runtime {fmt(rec.get('runtime_ms'), '.3g')} ms ref {fmt(rec.get('ref_runtime_ms'), '.3g')} ms "
                      f"{rec['error'][-160:]!r}", flush=True)
                save()
            print(f"== {phase}: musacoder, {a.workers} workers", flush=True)
            recs, wall = run_musacoder(a, items, work, phase)
            r["musacoder"] = {"summary": summarize(recs, wall), "results": recs}
            for pid, rec in recs.items():
                print(f"  {pid:45s} {rec['outcome']:13s} wall {fmt(rec['wall_s'], '6.1f')}s "
                      f"speedup {fmt(rec.get('speedup'), '.3g')} {rec['error'][-160:]!r}", flush=True)
                top = sorted((rec.get("stage_s") or {}).items(), key=lambda kv: -kv[1])[:6]
                if top:  # where its seconds went, largest stages first
                    print("      " + ", ".join(f"{k} {x:.1f}s" for k, x in top), flush=True)
            kb_rate, mc_rate = kb["summary"]["verdicts_per_min"], r["musacoder"]["summary"]["verdicts_per_min"]
            r["ratio_verdicts_per_min"] = mc_rate / kb_rate if kb_rate and mc_rate is not None else None
            r["disagree"] = disagreements(kb["results"], recs)
            r["speedups"] = speedup_pairs(kb["results"], recs)
            save()
    finally:  # also when cut short: the table of what was measured
        print_table(report)
        if a.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
