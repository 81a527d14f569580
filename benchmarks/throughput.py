"""Throughput and build latency of MooreEval on a folder of candidates, cold and warm cache.

    python benchmarks/throughput.py --kernelbench-dir ../shared/kernelbench --candidates benchmarks/candidates/cuda \
        --workers 4 --json throughput.json

Each candidate `<candidates>/levelN/<task>.py` is verified against `<kernelbench>/levelN/<task>.py`. Task sizes are
shrunk (largest size constant halved) until inputs, outputs and weights together are at most --max-input-mb, the same for every run. Prints a
table and writes JSON: verdicts per minute cold and warm, build seconds (median, p90), status counts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path


def consistent(task_path: Path, over: dict) -> bool:
    """The reference still runs at the shrunk sizes (checked on meta tensors; ops meta cannot run count as fine)."""
    import torch

    from musacoder.tasks import load_module, load_task

    if not over:
        return True
    m = load_module(load_task(task_path, over))
    try:
        with torch.device("meta"), torch.no_grad():
            m.Model(*m.get_init_inputs())(*m.get_inputs())
    except NotImplementedError:
        return True
    except Exception:  # noqa: BLE001 - e.g. a size that must equal another one (HingeLoss)
        return False
    return True


def shrink_overrides(task_path: Path, max_bytes: int) -> dict | None:
    """Size overrides that bring the task's inputs under `max_bytes` (largest size constant halved until they fit),
    or None when the shrunk task no longer runs."""
    over = _shrink(task_path, max_bytes)
    return over if consistent(task_path, over) else None


def _task_bytes(task) -> int:
    """Bytes of the task's inputs, outputs and weights (inputs alone when the reference cannot run on meta tensors)."""
    import torch

    from musacoder.judge.slots import meta_bytes
    from musacoder.tasks import load_module

    m = load_module(task)
    try:
        return sum(meta_bytes(m))
    except Exception:  # noqa: BLE001 - ops without meta kernels
        with torch.device("meta"):
            return sum(x.numel() * x.element_size() for x in m.get_inputs() if isinstance(x, torch.Tensor))


def _shrink(task_path: Path, max_bytes: int) -> dict:
    from musacoder.tasks import load_task, size_constants

    task = load_task(task_path)
    sizes = {k: v for k, v in size_constants(task.source).items() if isinstance(v, int) and not isinstance(v, bool) and v > 1}
    over: dict = {}
    for _ in range(40):
        if _task_bytes(load_task(task_path, over)) <= max_bytes or not sizes:
            return over
        name = max(sizes, key=lambda k: over.get(k, sizes[k]))
        cur = over.get(name, sizes[name])
        if cur <= 1:
            return over
        over[name] = max(1, cur // 2)
    return over


def pairs(kb: Path, cands: Path):
    for c in sorted(cands.glob("level*/*.py")):
        t = kb / c.parent.name / c.name
        if t.exists():
            yield c.parent.name + "/" + c.stem, t, c


def runnable_pairs(kb: Path, cands: Path, max_mb: float, every: int = 1, limit: int = 0) -> list[tuple]:
    """(id, task path, candidate path, size overrides) of every `every`-th pair whose task still runs once shrunk to
    `max_mb`, at most `limit` of them (0: all; the skipped ones do not count and are named on stderr)."""
    out, skipped = [], []
    for i, t, c in list(pairs(kb, cands))[::every]:
        if limit and len(out) >= limit:
            break
        over = shrink_overrides(t, int(max_mb * 2**20))
        if over is None:
            skipped.append(i)
        else:
            out.append((i, t, c, over))
    if skipped:
        print(f"skipped (the task does not run once shrunk to {max_mb} MB): {', '.join(skipped)}", file=sys.stderr)
    return out


class GpuMemorySampler:
    """Samples the GPU's used memory (nvidia-smi, once a second; no CUDA context in this process) while a phase runs."""

    def __init__(self):
        import threading

        self.peak_mib, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        import subprocess

        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=10).stdout
                self.peak_mib = max([self.peak_mib] + [int(x) for x in out.split() if x.isdigit()])
            except (OSError, subprocess.SubprocessError):
                return  # no nvidia-smi: nothing to sample
            self._stop.wait(1.0)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=15)


def read_log(log: Path | None) -> dict:
    """{id: Verdict} of a verdict log written by `append_log` ({} when there is none)."""
    from musacoder.records import Verdict

    out = {}
    if log is not None and log.exists():
        for line in log.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                out[rec.pop("id")] = Verdict.model_validate(rec)
    return out


def append_log(log: Path | None, job_id: str, v) -> None:
    """Append one verdict (without its feedback) to a JSONL log, as it comes."""
    if log is not None:
        with log.open("a") as f:
            f.write(json.dumps({"id": job_id, **v.model_dump(mode="json", exclude={"feedback"})}) + "\n")


def run_batch(items, workers: int, cache: Path, log: Path | None = None, verify_set: dict | None = None):
    """Verify `items`; each verdict is appended to `log` (JSONL) as it comes, and ids already there are skipped (a
    cut run resumes), their verdicts read back. `verify_set`: VerifyConfig fields to set."""
    from musacoder.config import VerifyConfig
    from musacoder.judge.batch import VerifyJob, verify_many
    from musacoder.tasks import load_task

    cfg = VerifyConfig(cache_dir=cache, repeats=20, max_repeats=100, time_budget_s=3.0, **(verify_set or {}))
    out = read_log(log)
    jobs = [VerifyJob(i, load_task(t, o), c.read_text(), "cuda") for i, t, c, o in items if i not in out]
    t0 = time.monotonic()
    done_at = []  # seconds from the start at which each verdict came back
    for job, v in verify_many(jobs, workers=workers, config=cfg):
        out[job.id] = v
        done_at.append(time.monotonic() - t0)
        append_log(log, job.id, v)
        stages = " ".join(f"{k}={x:.1f}" for k, x in v.stage_s.items())
        why = ""
        if v.status != "ok" and (v.violations or v.error):
            why = " | " + (v.violations[0] if v.violations else v.error).strip().splitlines()[-1][:160]
        print(f"  {job.id:45s} {v.status:12s} build {v.build_s or 0:5.1f}s speedup {v.speedup or 0:6.2f} wall {v.wall_s:6.1f}s [{stages}]{why}", flush=True)
    return out, time.monotonic() - t0, done_at


def steady_rate(done_at: list[float], workers: int) -> float | None:
    """Verdicts per minute after the first wave (from the `workers`-th verdict to the last): the rate of a pool that
    is already running, without the batch's start-up, where every worker is started at the same moment."""
    if len(done_at) <= workers + 1:
        return None
    span = done_at[-1] - done_at[workers - 1]
    return 60 * (len(done_at) - workers) / span if span > 0 else None


def verify_fields(pairs: list[str], fail) -> dict:
    """`--verify FIELD=VALUE` arguments as VerifyConfig fields with their types (pydantic reads "false", "3" … as the
    field's type); `fail(message)` for a malformed pair, an unknown field or a bad value."""
    verify_set = {}
    for kv in pairs:
        field, sep, value = kv.partition("=")
        if not sep:
            fail(f"--verify takes FIELD=VALUE, got {kv!r}")
        verify_set[field.strip()] = value.strip()
    if not verify_set:
        return {}
    from pydantic import ValidationError

    from musacoder.config import VerifyConfig

    unknown = sorted(set(verify_set) - set(VerifyConfig.model_fields))
    if unknown:
        fail(f"--verify: no VerifyConfig field {', '.join(unknown)} (see musacoder/config.py)")
    try:
        checked = VerifyConfig(**verify_set)
    except ValidationError as e:
        fail(f"--verify: {e}")
    return {k: getattr(checked, k) for k in verify_set}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--candidates", type=Path, default=Path("benchmarks/candidates/cuda"))
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated globs over ids (level1/19_*); default all")
    ap.add_argument("--log", type=Path, default=None, help="append each verdict to this JSONL as it comes; ids already "
                    "in it are skipped (resume a cut run; one log per phase: PATH.cold.jsonl, PATH.warm.jsonl)")
    ap.add_argument("--max-input-mb", type=float, default=256)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--cache", type=Path, default=None, help="build cache (default: a fresh temporary folder = cold); "
                    "the cold phase is cold only for candidates not already in it (its table counts cached builds)")
    ap.add_argument("--phases", default="cold,warm", help="which phases to run, in order: `warm` alone repeats the warm "
                    "measurement on a --cache an earlier run filled (e.g. with another --workers)")
    ap.add_argument("--print-overrides", action="store_true", help="print --only and --set SCOPE:NAME=VALUE arguments "
                    "that make kernelbench_style_baseline.py run the same (first --limit) candidates at the same sizes, and exit")
    ap.add_argument("--verify", action="append", default=[], metavar="FIELD=VALUE",
                    help="a VerifyConfig field for every verification (repeatable), e.g. clean_reference=false")
    a = ap.parse_args()
    verify_set = verify_fields(a.verify, ap.error)
    items = runnable_pairs(a.kernelbench_dir, a.candidates, a.max_input_mb, limit=a.limit)
    if a.only:
        import fnmatch

        globs = a.only.split(",")
        rank = {x[0]: min((k for k, g in enumerate(globs) if fnmatch.fnmatch(x[0], g)), default=None) for x in items}
        items = sorted((x for x in items if rank[x[0]] is not None), key=lambda x: rank[x[0]])  # in --only's order
    if a.print_overrides:
        print(" ".join([f"--only '{','.join(i + '*' for i, _, _, _ in items)}'"] +
                       [f"--set '{i}*:{k}={v}'" for i, _, _, o in items for k, v in o.items()]))
        return
    from musacoder.judge.slots import DEVICE_SLOTS, GiB, WORKER_FIXED, TRUSTED_FIXED, footprint
    from musacoder.tasks import load_module, load_task

    def estimate(task) -> float:
        fp = footprint(load_module(task))
        return (fp.total if fp else WORKER_FIXED + TRUSTED_FIXED) / GiB

    estimate_gb = {i: estimate(load_task(t, o)) for i, t, _, o in items}
    cache = a.cache or Path(tempfile.mkdtemp(prefix="mc-bench-cache-"))
    res = {}
    phases = [x.strip() for x in a.phases.split(",") if x.strip()]
    if not phases or set(phases) - {"cold", "warm"}:
        ap.error(f"--phases takes cold and/or warm, comma-separated; got {a.phases!r}")
    if phases == ["warm"] and a.cache is None:
        ap.error("--phases warm needs the --cache an earlier run filled (a fresh cache would make it a cold phase)")
    for phase in phases:
        print(f"== {phase} cache: {len(items)} candidates, {a.workers} workers")
        DEVICE_SLOTS.peak.clear()
        with GpuMemorySampler() as mem:
            log = a.log.with_suffix(f".{phase}.jsonl") if a.log else None
            verdicts, secs, done_at = run_batch(items, a.workers, cache, log, verify_set)
        builds = sorted(v.build_s or 0 for v in verdicts.values())
        statuses: dict = {}
        for v in verdicts.values():
            statuses[v.status] = statuses.get(v.status, 0) + 1
        stages: dict = {}
        for v in verdicts.values():
            for k, x in v.stage_s.items():
                stages[k] = stages.get(k, 0.0) + x / len(verdicts)
        res[phase] = {"seconds": secs, "verdicts_per_min": 60 * len(done_at) / secs if secs > 0 else None,
                      "steady_verdicts_per_min": steady_rate(done_at, a.workers), "statuses": statuses,
                      "build_median_s": statistics.median(builds), "build_p90_s": builds[max(0, math.ceil(0.9 * len(builds)) - 1)],
                      "cached_builds": sum(bool(v.build_cached) for v in verdicts.values()),
                      "mean_stage_s": {k: round(x, 3) for k, x in sorted(stages.items())},
                      # the memory reservation: how many verifications it let share a GPU, what they reserved, what the
                      # GPU really held, and each candidate worker's own peak against the estimate it was admitted on
                      "slots_peak": {d: {"holding": n, "reserved_gb": round(b / 2**30, 1)} for d, (n, b) in DEVICE_SLOTS.peak.items()},
                      "gpu_used_peak_gb": round(mem.peak_mib / 1024, 1),
                      # each candidate worker's measured peak over the worker side of its admission estimate
                      "worker_peak_over_estimate_max": max([v.device_mem_gb / v.memory_estimate_gb["worker"]
                                                            for v in verdicts.values()
                                                            if v.device_mem_gb and v.memory_estimate_gb] or [0.0]),
                      "infra_errors": sum(v.status == "infra_error" for v in verdicts.values()),
                      "out_of_memory": sum("out of memory" in f"{v.error} {v.flags}" for v in verdicts.values()),
                      # the reference beside the candidate over the one in a clean worker (> 1: slower beside it)
                      "reference_in_process_over_clean": sorted(round(v.ref_runtime_ms_in_process / v.ref_runtime_ms_clean, 3)
                                                                for v in verdicts.values()
                                                                if v.ref_runtime_ms_in_process and v.ref_runtime_ms_clean),
                      "verdicts": {k: v.model_dump(mode="json", include={"status", "speedup", "build_s", "build_cached", "wall_s", "error", "violations", "stage_s", "device_mem_gb", "trusted_mem_gb", "memory_estimate_gb", "flags", "ref_runtime_ms_in_process", "ref_runtime_ms_clean"}) | {"estimate_gb": round(estimate_gb[k], 2) if k in estimate_gb else None} for k, v in verdicts.items()}}
        steady = res[phase]["steady_verdicts_per_min"]
        print(f"   {phase}: {res[phase]['verdicts_per_min'] or 0:.1f} verdicts/min (after the first wave: "
              f"{f'{steady:.1f}' if steady else '-'}); mean seconds per stage {res[phase]['mean_stage_s']}")
        gaps = res[phase]["reference_in_process_over_clean"]
        if gaps:
            print(f"   {phase} reference beside the candidate / in a clean worker: median {statistics.median(gaps):.3f}, "
                  f"range {gaps[0]:.3f}-{gaps[-1]:.3f} over {len(gaps)}")
        print(f"   {phase} memory: slots {res[phase]['slots_peak']}, GPU used at peak {res[phase]['gpu_used_peak_gb']} GB, "
              f"worst worker peak / estimate {res[phase]['worker_peak_over_estimate_max']:.2f}")
        if a.json:  # written after each phase, so a cut run keeps what it measured
            a.json.write_text(json.dumps({"workers": a.workers, "max_input_mb": a.max_input_mb,
                                          "overrides": {i: o for i, _, _, o in items}, **res}, indent=1))
    print("\n| phase | candidates | cached builds | seconds | verdicts/min | build median s | build p90 s | statuses |")
    print("|---|---|---|---|---|---|---|---|")
    for phase, r in res.items():
        print(f"| {phase} | {len(items)} | {r['cached_builds']} | {r['seconds']:.1f} | {r['verdicts_per_min'] or 0:.1f} | "
              f"{r['build_median_s']:.1f} | {r['build_p90_s']:.1f} | {r['statuses']} |")
    if a.cache is None:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
