"""The diagnostic data mix: profile tasks into operator families, pick a balanced diagnostic set, score a model on it
(a `musacoder bench` run), and turn its per-family pass rates into sampling weights for the training tasks.

task folder -> profiles (`profile_folder`, cached in profiles.jsonl) -> balanced set (`balanced_set`)
bench run on the set -> per-family pass rates (`family_pass_rates`) -> weights (`family_weights`) -> mixed tasks
"""

from __future__ import annotations

import hashlib
import random
import shutil
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from musacoder.data.dataset import append_jsonl, read_jsonl
from musacoder.data.families import FAMILIES


class TaskProfile(BaseModel):
    """One task's operator families (one line of profiles.jsonl)."""

    file: str  # path relative to the profiled folder
    sha256: str  # of the source: the cache key
    family: str  # the task's label (`musacoder.data.families.task_family`); "error" when it could not be profiled
    families: dict[str, int] = Field(default_factory=dict)  # family → number of outermost aten ops in it
    ops: list[str] = Field(default_factory=list)  # outermost aten ops in call order
    error: str = ""


def family_weights(pass_rates: Mapping[str, float], families: Iterable[str], *, floor: float = 0.1,
                   easy_scale: float = 0.5, easy: Sequence[str] = ("elementwise",)) -> dict[str, float]:
    """Share of the training mix for each family, from the model's diagnostic pass rate p_f ∈ [0, 1]:

        raw_f   = (1 − p_f + floor) · (easy_scale if f ∈ easy else 1)
        share_f = raw_f / Σ_g raw_g                    (over `families`; the shares sum to 1)

    A family the model fails (p = 0) gets 1 + floor, one it always solves keeps `floor` (so it is not forgotten);
    easy elementwise/activation tasks are scaled by `easy_scale`. A family absent from `pass_rates` (no diagnostic
    task) takes the mean of the measured rates. The paper says weak families are up-sampled and easy elementwise
    ones down-sampled without a formula; this is the rule musacoder uses.
    """
    families = list(dict.fromkeys(families))
    if not pass_rates:
        raise ValueError("no measured family: the bench run has no verdict for any profiled task")
    if floor < 0 or easy_scale < 0:
        raise ValueError(f"floor and easy_scale must be ≥ 0 (got {floor}, {easy_scale})")
    default = sum(pass_rates.values()) / len(pass_rates)
    raw = {}
    for f in families:
        p = min(max(pass_rates.get(f, default), 0.0), 1.0)
        raw[f] = (1.0 - p + floor) * (easy_scale if f in easy else 1.0)
    total = sum(raw.values())
    if total <= 0:
        raise ValueError("every family has weight 0 (floor 0 and every family solved); raise --floor")
    return {f: raw[f] / total for f in families}


def task_weights(task_families: Mapping[str, str], shares: Mapping[str, float]) -> dict[str, float]:
    """Sampling probability of each task: its family's share split evenly among that family's tasks,

        w_t = share_{f(t)} / n_{f(t)}

    so a family's weight does not grow with how many tasks the pool happens to hold (the weights sum to 1 over
    families present in `task_families`, renormalised)."""
    counts = Counter(task_families.values())
    w = {t: shares.get(f, 0.0) / counts[f] for t, f in task_families.items()}
    total = sum(w.values())
    if total <= 0:
        raise ValueError("no task has a positive weight")
    return {t: v / total for t, v in w.items()}


def draw_mix(weights: Mapping[str, float], size: int, seed: int) -> list[str]:
    """`size` task draws with replacement by `weights` (sorted keys, seeded: the same inputs give the same mix)."""
    keys = sorted(weights)
    rng = random.Random(seed)
    return rng.choices(keys, weights=[weights[k] for k in keys], k=size)


def balanced_set(profiles: Sequence[TaskProfile], per_family: int, seed: int) -> list[TaskProfile]:
    """At most `per_family` tasks of each family (a seeded random choice within the family), families in
    `FAMILIES` order; unprofilable tasks left out."""
    by_family: dict[str, list[TaskProfile]] = defaultdict(list)
    for p in sorted(profiles, key=lambda p: p.file):
        if p.family != "error":
            by_family[p.family].append(p)
    rng = random.Random(seed)
    out = []
    for f in FAMILIES:
        group = by_family.get(f, [])
        out += sorted(rng.sample(group, min(per_family, len(group))), key=lambda p: p.file)
    return out


# ---- edges: files, profiling, run directories ----------------------------------------------------------------

def task_files(folder: Path) -> list[Path]:
    from musacoder.data.decontam import find_task_files

    return find_task_files(folder)


def profile_folder(folder: Path, cache: Path, *, progress: bool = True) -> list[TaskProfile]:
    """Profiles of every task file under `folder`; each is appended to `cache` (JSONL) as it is made, and a task
    whose source hash is already there is not profiled again (a rerun resumes). Runs the tasks' code in-process:
    use it on trusted folders (stage 1's output, KernelBench)."""
    files = task_files(folder)
    known = {r["sha256"]: r for r in read_jsonl(cache) if "sha256" in r}
    out: list[TaskProfile] = []
    from rich.progress import track

    for path in track(files, description="profile", disable=not progress or not files):
        rel = str(path.relative_to(folder))
        source = path.read_text(encoding="utf-8")
        sha = hashlib.sha256(source.encode()).hexdigest()
        if sha in known:
            out.append(TaskProfile.model_validate({**known[sha], "file": rel}))
            continue
        profile = profile_file(path, rel, sha)
        append_jsonl(cache, profile.model_dump())
        known[sha] = profile.model_dump()
        out.append(profile)
    return out


def profile_file(path: Path, rel: str, sha: str) -> TaskProfile:
    from musacoder.data.families import families_of, profile_ops, task_family
    from musacoder.tasks import load_task

    try:
        ops = profile_ops(load_task(path))
    except Exception as e:  # noqa: BLE001 - a task that does not run is reported, not fatal
        return TaskProfile(file=rel, sha256=sha, family="error", error=f"{type(e).__name__}: {e}"[:500])
    counts = families_of(ops)
    return TaskProfile(file=rel, sha256=sha, family=task_family(counts), families=dict(counts),
                       ops=[op for op, _ in ops])


def write_diagnostic(tasks_dir: Path, out: Path, *, per_family: int, seed: int,
                     progress: bool = True) -> list[TaskProfile]:
    """Profile `tasks_dir`, copy a balanced diagnostic set to `out/tasks/` (flat, ready for `musacoder bench
    --suite dir:out/tasks`), and write `out/diagnostic.jsonl` (the chosen profiles)."""
    profiles = profile_folder(tasks_dir, out / "profiles.jsonl", progress=progress)
    chosen = balanced_set(profiles, per_family, seed)
    if not chosen:
        raise ValueError(f"{tasks_dir}: no task could be profiled (see {out / 'profiles.jsonl'})")
    dest = out / "tasks"
    dest.mkdir(parents=True, exist_ok=True)
    names = set()
    for p in chosen:
        name = Path(p.file).name
        if name in names:  # same file name in two subfolders: keep both
            name = p.file.replace("/", "__")
        names.add(name)
        shutil.copyfile(tasks_dir / p.file, dest / name)
    (out / "diagnostic.jsonl").write_text("".join(p.model_dump_json() + "\n" for p in chosen))
    return chosen


def family_pass_rates(run_dir: Path, *, cache: Path, progress: bool = True) -> dict[str, tuple[int, int]]:
    """(passed, total) samples per family in a bench run: a (task, sample) passes when any of its turns has status
    `ok`; a task's family comes from profiling its file (the run's tasks.jsonl `path`), cached in `cache`."""
    from musacoder.bench.rundir import RunDir

    rd = RunDir(run_dir)
    if not rd.exists():
        raise FileNotFoundError(f"{run_dir}: not a bench run directory (no config.json); run `musacoder bench "
                                "--suite dir:DIAG/tasks --out RUN_DIR` first")
    known = {r["sha256"]: r for r in read_jsonl(cache) if "sha256" in r}
    fam_of: dict[str, str] = {}
    for t in rd.read_tasks():
        path = Path(t.get("path") or "")
        if not path.is_file():
            raise FileNotFoundError(f"{run_dir}/tasks.jsonl: task {t['key']} points at {path}, which is gone; "
                                    "rerun the bench on the diagnostic folder")
        sha = hashlib.sha256(path.read_text(encoding="utf-8").encode()).hexdigest()
        if sha not in known:
            profile = profile_file(path, path.name, sha)
            append_jsonl(cache, profile.model_dump())
            known[sha] = profile.model_dump()
        fam_of[t["key"]] = known[sha]["family"]
    samples: dict[tuple[str, int], bool] = {}
    for (key, sample, _turn), rec in rd.read_verdicts().items():
        if rec["verdict"].get("status") == "infra_error":
            continue  # no verdict on the model
        samples[(key, sample)] = samples.get((key, sample), False) or rec["verdict"].get("status") == "ok"
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for (key, _), ok in samples.items():
        fam = fam_of.get(key)
        if fam is None or fam == "error":
            continue
        counts[fam][0] += int(ok)
        counts[fam][1] += 1
    return {f: (c[0], c[1]) for f, c in counts.items()}


def build_mix(tasks_dir: Path, run_dir: Path, out: Path, *, size: int, seed: int, floor: float = 0.1,
              easy_scale: float = 0.5, progress: bool = True) -> dict:
    """The whole mix step: profile `tasks_dir`, read the bench run's per-family pass rates, compute the weights, draw
    `size` tasks. Writes `out/weights.json`, the mixed dataset `out/mix/` (Parquet + card; one row per draw) and the
    drawn tasks (each once) under `out/tasks/`. Returns the weights document."""
    import json

    from musacoder.data.dataset import write_dataset

    cache = out / "profiles.jsonl"
    profiles = [p for p in profile_folder(tasks_dir, cache, progress=progress) if p.family != "error"]
    if not profiles:
        raise ValueError(f"{tasks_dir}: no task could be profiled (see {cache})")
    counts = family_pass_rates(run_dir, cache=cache, progress=progress)
    rates = {f: c[0] / c[1] for f, c in counts.items() if c[1]}
    pool = {p.file: p.family for p in profiles}
    shares = family_weights(rates, sorted(set(pool.values()), key=FAMILIES.index), floor=floor,
                            easy_scale=easy_scale)
    per_task = task_weights(pool, shares)
    draws = draw_mix(per_task, size, seed)
    doc = {"rule": "share_f = (1 - p_f + floor) * (easy_scale if f == 'elementwise' else 1), normalised; "
                   "task weight = share_f / n_f",
           "floor": floor, "easy_scale": easy_scale, "seed": seed, "size": size,
           "bench_run": str(run_dir), "tasks_dir": str(tasks_dir),
           "pass_rates": {f: {"passed": c[0], "samples": c[1], "rate": c[0] / c[1] if c[1] else None}
                          for f, c in sorted(counts.items())},
           "families": {f: {"share": shares[f], "tasks": sum(1 for v in pool.values() if v == f),
                            "pass_rate_used": rates.get(f, sum(rates.values()) / len(rates)),
                            "measured": f in rates,
                            "draws": sum(1 for d in draws if pool[d] == f)} for f in shares},
           "task_weights": per_task}
    out.mkdir(parents=True, exist_ok=True)
    (out / "weights.json").write_text(json.dumps(doc, indent=1) + "\n")
    by_file = {p.file: p for p in profiles}
    rows = [{"draw": i, "file": f, "family": pool[f], "weight": per_task[f], "ops": by_file[f].ops,
             "source": (tasks_dir / f).read_text(encoding="utf-8")} for i, f in enumerate(draws)]
    write_dataset(rows, out / "mix", title="musacoder diagnostic task mix",
                  description=f"{size} training tasks drawn with replacement from `{tasks_dir}` by per-family "
                              f"weights from the diagnostic bench run `{run_dir}` (weights.json has the rates and "
                              "shares).",
                  columns={"draw": "draw number", "file": "task file, relative to the task folder",
                           "family": "operator family of the task", "weight": "its sampling probability",
                           "ops": "outermost aten ops of its reference", "source": "the task file's text"},
                  made_by=f"musacoder data mix {tasks_dir} --bench {run_dir} --out {out} --size {size} "
                          f"--seed {seed} --floor {floor} --easy-scale {easy_scale}", count_by="family")
    dest = out / "tasks"
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(set(draws)):
        shutil.copyfile(tasks_dir / f, dest / f.replace("/", "__"))
    return doc
