"""Many verifications at once: a bounded pool over `verify`, results streamed as they finish.

Each verification already runs its candidate in its own sandboxed worker process, so the pool is threads that
supervise those processes. While a batch runs, GPU verifications take worker processes started ahead (as many as
there are pool threads; still one fresh process per candidate), so Python, torch and the CUDA context start while
other candidates build and run. `verify_batch` is the manifest/JSONL edge used by `musacoder verify-batch`: results are
appended (and flushed) as they finish, and a rerun skips ids already present in the output file.
"""

from __future__ import annotations

import json
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

from musacoder.config import VerifyConfig
from musacoder.records import Task, Verdict, VerifyRequest


@dataclass
class VerifyJob:
    id: str
    task: Task
    candidate: str  # raw response text or plain code
    backend: str | None = None
    overrides: dict = field(default_factory=dict)


def verify_many(jobs: Iterable[VerifyJob], *, workers: int = 1, config: VerifyConfig | None = None,
                verifier: Callable[..., Verdict] | None = None, leaders_ahead: bool = True,
                largest_first: bool = True) -> Iterator[tuple[VerifyJob, Verdict]]:
    """Verify jobs with at most `workers` in flight; yields (job, verdict) in completion order. The jobs of one task
    run next to each other, the tasks with the most bytes of inputs and weights first (`largest_first`; off: in the
    order given), each task's first job started ahead (`by_task`, unless `leaders_ahead` is off). Largest first
    made the 16 x 8 load 12 % faster on one H100 than the order given (the second run with a warm build cache), and
    replays of both runs' own times in the admission model give it 12-16 % either way (docs/benchmarks.md, runs 10
    and 11). The jobs share one per-task cache for this batch
    (`musacoder.judge.task_cache`): the task's reference work is done once, with secrets drawn for this batch."""
    from functools import partial

    from musacoder.judge.pipeline import verify
    from musacoder.judge.task_cache import TaskCache

    fn = verifier or partial(verify, cache=TaskCache())
    cfg = config or VerifyConfig()
    jobs = by_task(jobs, workers if leaders_ahead else 1, size=device_bytes if largest_first else None)
    if verifier is None:  # verified here: the fork servers' imports run while the first verifications begin
        _start_servers(jobs, cfg)

    def one(job: VerifyJob) -> Verdict:
        try:
            return fn(job.task, job.candidate, backend=job.backend, overrides=job.overrides or None, config=cfg)
        except Exception as e:  # noqa: BLE001 - a bad job must not stop the batch
            return Verdict(status="infra_error", task=job.task.key, error=f"{type(e).__name__}: {e}",
                           feedback=f"The verifier could not run this job: {e}")

    from musacoder.judge.sandbox import prestarted_workers

    with prestarted_workers(max(1, workers)):
        yield from bounded(one, jobs, workers)


def _start_servers(jobs: list[VerifyJob], cfg: VerifyConfig) -> None:
    """Start the fork servers of the batch's backends (each job's, or what its text shows, as the verification will
    decide it) without waiting for them (`stages.rpc.start_servers_early`)."""
    from musacoder.candidates import extract_code
    from musacoder.judge.stages.extract import chosen_backend
    from musacoder.judge.stages.rpc import start_servers_early
    from musacoder.records import BACKENDS

    backends = {chosen_backend(job.backend, extract_code(job.candidate).backend) for job in jobs}
    start_servers_early(cfg, backends & set(BACKENDS))


def by_task(jobs: Iterable[VerifyJob], workers: int = 1,
            size: Callable[[VerifyJob], int] | None = None) -> list[VerifyJob]:
    """The jobs with those of one task together, tasks in the order they first appear (a stable grouping) or, given
    `size` (a job's device bytes), the largest first, and the first job of each task moved `leads_ahead(workers, …)`
    tasks ahead of the rest of its task: it pays the task's first-time work (its build, shared by the task's
    identical sources, the reading of its library, the task's reference cases) while the tasks before it run, so the
    rest of its task finds that work done instead of waiting for it together. Largest first (`verify_many`'s
    `largest_first`): a task whose verifications run one at a time for memory starts its chain while small ones run
    beside it. The order is all this changes; every job is run once."""
    grouped: dict[tuple, list[VerifyJob]] = {}
    for job in jobs:
        grouped.setdefault((job.task.key, job.task.source, tuple(sorted(job.overrides.items()))), []).append(job)
    groups = list(grouped.values())
    if size is not None:
        groups.sort(key=lambda g: -size(g[0]))  # stable: equal sizes keep the order given
    lead = leads_ahead(workers, [len(g) for g in groups])
    if not lead:
        return [job for group in groups for job in group]
    out = [g[0] for g in groups[:lead + 1]]
    for i, group in enumerate(groups):
        out += group[1:]
        if i + lead + 1 < len(groups):
            out.append(groups[i + lead + 1][0])
    return out


def device_bytes(job: VerifyJob) -> int:
    """What orders tasks largest first (`by_task`'s `size`): the bytes of a job's inputs and weights (its task with
    its size overrides, made on the meta device without running its forward, which for a recurrent task takes tens of
    seconds there: the whole footprint, `slots.footprint`, grows with them); 0 where they cannot be made."""
    from musacoder.judge.slots import meta_bytes
    from musacoder.judge.stages.context import task_with_overrides
    from musacoder.tasks import load_module

    try:
        inputs, _, weights = meta_bytes(load_module(task_with_overrides(job.task, job.overrides or None),
                                                    "musacoder_task_size"), forward=False)
    except Exception:  # noqa: BLE001 - a task that does not load is the verification's to report
        return 0
    return inputs + weights


def leads_ahead(workers: int, sizes: list[int]) -> int:
    """How many tasks ahead the first job of a task starts: as many tasks' jobs as `workers` holds at once (workers
    // the median task's job count), 0 where a task has one job or the pool holds less than one task."""
    if len(sizes) < 2:
        return 0
    median = sorted(sizes)[len(sizes) // 2]
    return 0 if median < 2 else max(0, workers) // median


def bounded(fn: Callable, jobs: Iterable, workers: int) -> Iterator[tuple]:
    """(job, fn(job)) for every job, in completion order, with at most `workers` calls in flight (threads); jobs are
    drawn from the iterable only as slots free up."""
    it = iter(jobs)
    workers = max(1, workers)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running = {}
        for job in it:
            running[pool.submit(fn, job)] = job
            if len(running) >= workers:
                break
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                job = running.pop(fut)
                yield job, fut.result()
                nxt = next(it, None)
                if nxt is not None:
                    running[pool.submit(fn, nxt)] = nxt


class ManifestError(ValueError):
    pass


def read_manifest(path: Path) -> list[VerifyRequest]:
    reqs, seen = [], set()
    base = path.parent
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            req = VerifyRequest.model_validate(json.loads(line))
        except Exception as e:  # noqa: BLE001
            raise ManifestError(f"{path}:{n}: not a valid manifest line ({e}); expected "
                                '{"id": ..., "task": PATH, "candidate": PATH, "backend": "cpu"|"triton"|"cuda"}') from None
        if req.id in seen:
            raise ManifestError(f"{path}:{n}: duplicate id {req.id!r}")
        seen.add(req.id)
        for attr in ("task", "candidate"):
            p = Path(getattr(req, attr))
            if not p.is_absolute() and not p.exists() and (base / p).exists():
                setattr(req, attr, str(base / p))
        reqs.append(req)
    return reqs


def done_ids(out: Path) -> set[str]:
    ids = set()
    if out.exists():
        for line in out.read_text().splitlines():
            try:
                ids.add(json.loads(line)["id"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash is redone
    return ids


def verify_batch(manifest: Path, out: Path, workers: int = 1, config: VerifyConfig | None = None,
                 on_result: Callable[[str, Verdict], None] | None = None) -> int:
    """Run a manifest; returns how many results were written now."""
    from musacoder.tasks import load_task

    reqs = read_manifest(manifest)
    skip = done_ids(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # a partial last line (crash mid-write) would corrupt the next append
    if out.exists() and out.stat().st_size and not out.read_bytes().endswith(b"\n"):
        with open(out, "ab") as f:
            f.write(b"\n")

    def jobs():
        for r in reqs:
            if r.id in skip:
                continue
            try:
                task = load_task(r.task, r.set or None)
                text = Path(r.candidate).read_text()
            except Exception as e:  # noqa: BLE001 - reported as a result line
                task = Task(name=Path(r.task).stem, source="")
                text = f"\x00musacoder-error:{e}"
            yield VerifyJob(r.id, task, text, r.backend, {})

    from musacoder.judge.task_cache import TaskCache

    cache = TaskCache()  # this batch's: its secrets are drawn for this run of the manifest

    def guarded(task, candidate, **kw):
        if candidate.startswith("\x00musacoder-error:"):
            raise ValueError(candidate.split(":", 1)[1])
        from musacoder.judge.pipeline import verify

        return verify(task, candidate, cache=cache, **kw)

    n = 0
    with open(out, "a") as f:
        for job, verdict in verify_many(jobs(), workers=workers, config=config, verifier=guarded):
            f.write(json.dumps({"id": job.id, **verdict.model_dump(mode="json")}) + "\n")
            f.flush()
            n += 1
            if on_result:
                on_result(job.id, verdict)
    return n
