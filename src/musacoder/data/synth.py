"""Stage 1 driver: candidates from the catalogue, random graphs and real-architecture blocks, each executed before it
is kept, one manifest line per candidate (`manifest.jsonl` next to the tasks). IO lives here; generation and checks
are imported.

Candidate `i` of a run is a pure function of (seed, i, scale, families, graph_fraction, block_fraction), so a rerun
into the same folder skips the indices its manifest already holds and continues where the last run stopped.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from musacoder.data.blocks import block_task
from musacoder.data.catalogue import CATALOGUE, FAMILIES, catalogue_task
from musacoder.data.check import CheckLimits
from musacoder.data.graphs import graph_task
from musacoder.data.records import ManifestRow, TaskCheck, TaskSpec
from musacoder.data.render import render_task

MANIFEST = "manifest.jsonl"
ALL_FAMILIES: tuple[str, ...] = (*FAMILIES, "graph", "block")


class SynthConfig(BaseModel):
    """Knobs of `musacoder data tasks` (docs/data.md, *Stage 1*)."""

    count: int = Field(60, ge=1)  # candidates to generate and check (kept + rejected)
    seed: int = 0  # generation seed; also the seed the checks draw weights and inputs from
    scale: float = Field(1.0, gt=0)  # multiplies every size; 1 is CPU-sized
    families: list[str] = Field(default_factory=list)  # catalogue families, "graph" and/or "block"; empty: all
    graph_fraction: float = Field(0.5, ge=0, le=1)  # share of graph candidates among graph and catalogue ones
    block_fraction: float = Field(0.15, ge=0, le=1)  # share of real-architecture blocks when other kinds are selected
    limits: CheckLimits = Field(default_factory=CheckLimits)
    threads: int = Field(1, ge=1)  # torch threads in the check process (timings comparable, bitwise reruns)


class SynthSummary(BaseModel):
    candidates: int
    kept: int
    reasons: dict[str, int]  # rejection reason (its text up to the first colon) -> count
    families: dict[str, int]  # kept tasks per family
    manifest: str


def candidate(config: SynthConfig, index: int) -> TaskSpec:
    """The index-th candidate of a run (pure)."""
    families = set(config.families)
    unknown = families - set(ALL_FAMILIES)
    if unknown:
        raise ValueError(f"unknown families {sorted(unknown)}; choose from {', '.join(ALL_FAMILIES)}")
    rng = random.Random(f"musacoder.data:{config.seed}:{index}")
    cat = families - {"graph", "block"}
    want_graph = not families or "graph" in families
    want_cat = not families or bool(cat)
    if not families or "block" in families:  # drawn from a stream of its own: the other candidates stay as they were
        pick = random.Random(f"musacoder.data.block:{config.seed}:{index}")
        if not (want_graph or want_cat) or pick.random() < config.block_fraction:
            return block_task(rng, config.scale)
    if want_graph and (not want_cat or rng.random() < config.graph_fraction):
        return graph_task(rng, config.scale)
    return catalogue_task(rng, config.scale, cat or None)


def file_name(index: int, spec: TaskSpec) -> str:
    """`<index>_<Name>[_<variant>].py`, KernelBench's naming (`musacoder.tasks` reads the leading number)."""
    suffix = f"_{spec.variant}" if spec.kind == "catalogue" and spec.variant != "base" else ""
    return f"{index}_{spec.name}{suffix}.py"


def read_manifest(path: Path) -> list[ManifestRow]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                rows.append(ManifestRow.model_validate_json(line))
            except ValueError:  # a line cut short by an interrupted run: that candidate is redone
                continue
    return rows


def manifest_row(index: int, name: str, spec: TaskSpec, check: TaskCheck, source: str, config: SynthConfig,
                 reason: str | None = None) -> ManifestRow:
    return ManifestRow(
        file=name, index=index, family=spec.family, kind=spec.kind, variant=spec.variant,
        kept=check.kept and not reason, reason=reason or check.reason, ops=spec.ops,
        shapes={"inputs": check.input_shapes, "outputs": check.output_shapes}, dtype=spec.dtype,
        sha256=hashlib.sha256(source.encode()).hexdigest(), forward_ms=check.forward_ms,
        footprint_bytes=check.footprint_bytes, seed=config.seed, scale=config.scale,
    )


def summarize(rows: list[ManifestRow], manifest: Path) -> SynthSummary:
    kept = [r for r in rows if r.kept]
    return SynthSummary(
        candidates=len(rows), kept=len(kept),
        reasons=dict(Counter(r.reason.split(":")[0] for r in rows if not r.kept).most_common()),
        families=dict(Counter(r.family for r in kept).most_common()), manifest=str(manifest),
    )


def synthesize(config: SynthConfig, out_dir: str | Path, progress: bool = True, checker=None) -> SynthSummary:
    """Generate `config.count` candidates into `out_dir`, keep those that pass `check_task`, append one manifest
    row per candidate (flushed as it is decided). `checker` defaults to a `CheckWorker` (a child process)."""
    from musacoder.data.worker import CheckWorker

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = out / MANIFEST
    rows = read_manifest(manifest)
    for r in rows:
        if (r.seed, r.scale) != (config.seed, config.scale):
            raise ValueError(f"{manifest} was written with seed {r.seed} and scale {r.scale}, not seed {config.seed} "
                             f"and scale {config.scale}; use another --out folder or the same settings")
    done = {r.index for r in rows}
    seen = {r.sha256: r.file for r in rows if r.kept}
    todo = [i for i in range(1, config.count + 1) if i not in done]
    own = checker is None
    checker = checker or CheckWorker(config.limits, config.threads)
    try:
        with _progress(progress, len(todo)) as advance, manifest.open("a") as log:
            for index in todo:
                spec = candidate(config, index)
                source = render_task(spec)
                name = file_name(index, spec)
                digest = hashlib.sha256(source.encode()).hexdigest()
                if digest in seen:
                    row = manifest_row(index, name, spec, TaskCheck(kept=False), source, config,
                                       reason=f"duplicate: same source as {seen[digest]}")
                else:
                    row = manifest_row(index, name, spec, checker.check(source, config.seed), source, config)
                if row.kept:
                    (out / name).write_text(source)
                    seen[digest] = name
                log.write(row.model_dump_json() + "\n")
                log.flush()
                rows.append(row)
                advance(row)
    finally:
        if own:
            checker.close()
    return summarize([r for r in rows if r.index <= config.count], manifest)


class _progress:
    """A rich progress bar (or nothing) whose `advance(row)` shows the running yield."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total, self.kept, self.seen = enabled, total, 0, 0

    def __enter__(self):
        if not self.enabled:
            return lambda row: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("tasks"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                            TimeRemainingColumn())
        self.bar.__enter__()
        self.task = self.bar.add_task("", total=self.total)

        def advance(row: ManifestRow) -> None:
            self.seen += 1
            self.kept += row.kept
            self.bar.update(self.task, advance=1, description=f"kept {self.kept}/{self.seen}")

        return advance

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.__exit__(*exc)


__all__ = ["ALL_FAMILIES", "CATALOGUE", "MANIFEST", "SynthConfig", "SynthSummary", "candidate", "file_name",
           "read_manifest", "synthesize"]
