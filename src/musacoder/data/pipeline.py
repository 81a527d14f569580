"""The whole data pipeline from one config file (`musacoder data pipeline --config FILE.toml`): stage 1 tasks,
decontamination, the diagnostic set and its bench run, the mix, stages 2–3 and the RFT pools, each into a subfolder
of `out`. Every step resumes (the stages' own resume rules), so a rerun after an interruption continues.

    OUT/tasks/          stage 1 (manifest.jsonl, the kept task files)
    OUT/decontam.json   decontamination report of OUT/tasks against `decontam.against`
    OUT/diagnostic/     profiles.jsonl, diagnostic.jsonl, tasks/ (the balanced set)
    OUT/bench/          the bench run of `bench.model` on the diagnostic set
    OUT/mix/            weights.json, mix/ (dataset), tasks/ (the drawn tasks)
    OUT/solutions/      run/, solutions/, repair/, optimise/, reviewer/ (datasets)
    OUT/rft/            run/, rft/ (dataset)
    OUT/musacoder.json  the stage manifest: `musacoder train sft --set 'data.train=["OUT"]'` reads
                        solutions/sft.jsonl (`musacoder.manifest`)

Paths in the config are relative to the working directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TasksSection(_Section):
    count: int = Field(60, ge=1, description="Stage-1 candidates (kept + rejected).")
    seed: int = 0
    scale: float = Field(1.0, gt=0, description="Multiplies every size.")
    families: list[str] = Field(default_factory=list,
                                description="Catalogue families, 'graph' and/or 'block'; empty = all.")
    graph_fraction: float = Field(0.5, ge=0, le=1)
    block_fraction: float = Field(0.15, ge=0, le=1, description="Share of real-architecture blocks.")


class DecontamSection(_Section):
    against: str | None = Field(None, description="Reference task folder (default $KERNELBENCH_DIR, else skipped).")
    trace: bool = Field(True, description="Structure signatures (runs the tasks' code on meta tensors).")


class DiagnoseSection(_Section):
    tasks: str | None = Field(None, description="Folder to draw the diagnostic set from (default: stage 1's output).")
    per_family: int = Field(4, ge=1)
    seed: int = 0


class GenerationSection(_Section):
    model: str = Field(description="openai:BASE_URL#MODEL, vllm:PATH_OR_NAME, hf:PATH or dir:PATH.")
    model_args: dict[str, Any] = Field(default_factory=dict)
    tasks: str | None = Field(None, description="Task folder (defaults: see each section).")
    samples: int = Field(4, ge=1)
    turns: int = Field(1, ge=1)
    temperature: float = 0.7
    max_tokens: int = 16384
    seed: int = 0


class MixSection(_Section):
    size: int = Field(1000, ge=1, description="Tasks drawn into the mix.")
    seed: int = 0
    floor: float = 0.1
    easy_scale: float = 0.5


class SolutionsSection(GenerationSection):
    turns: int = Field(3, ge=1)
    metadata: bool = True
    six_step: bool = True
    stop_on_pass: bool = False
    min_gain: float = 0.1


class RFTSection(GenerationSection):
    samples: int = Field(8, ge=1)
    temperature: float = 0.9
    cap: int = Field(4, ge=1)
    threshold: float = Field(0.7, ge=0, le=1)
    metadata: bool = True
    six_step: bool = True


class PipelineConfig(_Section):
    out: str = Field(description="Root folder of every stage's output.")
    backend: str = Field("cuda", description="Kernel language asked for and verified: cuda, triton, cpu or musa.")
    workers: int = Field(1, ge=1, description="Parallel verifications.")
    verify: dict[str, Any] = Field(default_factory=dict, description="VerifyConfig fields for every verification.")
    tasks: TasksSection = Field(default_factory=TasksSection)
    decontam: DecontamSection = Field(default_factory=DecontamSection)
    diagnose: DiagnoseSection = Field(default_factory=DiagnoseSection)
    bench: GenerationSection
    mix: MixSection = Field(default_factory=MixSection)
    solutions: SolutionsSection
    rft: RFTSection


def load_config(path: Path) -> PipelineConfig:
    import tomllib

    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as e:
        raise FileNotFoundError(f"pipeline config not found: {path}") from e
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from e
    try:
        return PipelineConfig.model_validate(data)
    except Exception as e:
        raise ValueError(f"{path}: {e}") from e


def run_pipeline(cfg: PipelineConfig, *, progress: bool = True, log=print,
                 made_by: str = "musacoder data pipeline --config CONFIG") -> dict[str, Any]:
    """Run every stage in order; returns a summary (also written to OUT/pipeline_summary.json)."""
    import os

    from musacoder.bench.runner import BenchConfig, run_bench
    from musacoder.data.check import CheckLimits
    from musacoder.data.dataset import write_data_manifest
    from musacoder.data.decontam import DecontamConfig, decontaminate
    from musacoder.data.mix import build_mix, write_diagnostic
    from musacoder.data.rft import RFT_ROWS, build_rft
    from musacoder.data.solutions import SFT_ROWS, build_datasets, generate
    from musacoder.data.synth import SynthConfig, synthesize

    out = Path(cfg.out)
    summary: dict[str, Any] = {}

    log("stage 1: tasks")
    t = cfg.tasks
    synth = synthesize(SynthConfig(count=t.count, seed=t.seed, scale=t.scale, families=t.families,
                                   graph_fraction=t.graph_fraction,
                                   block_fraction=t.block_fraction, limits=CheckLimits()), out / "tasks",
                       progress=progress)
    summary["tasks"] = {"candidates": synth.candidates, "kept": synth.kept, "families": dict(synth.families)}

    against = cfg.decontam.against or os.environ.get("KERNELBENCH_DIR")
    if against:
        log(f"decontamination against {against}")
        rows = decontaminate(out / "tasks", against, DecontamConfig(trace=cfg.decontam.trace), progress=progress)
        (out / "decontam.json").write_text(json.dumps([r.model_dump() for r in rows], indent=1) + "\n")
        summary["decontam"] = {"tasks": len(rows), "contaminated": sum(r.contaminated for r in rows)}
    else:
        log("decontamination skipped: set decontam.against or KERNELBENCH_DIR")

    log("diagnostic set")
    diag_src = Path(cfg.diagnose.tasks) if cfg.diagnose.tasks else out / "tasks"
    chosen = write_diagnostic(diag_src, out / "diagnostic", per_family=cfg.diagnose.per_family,
                              seed=cfg.diagnose.seed, progress=progress)
    summary["diagnostic"] = {p.file: p.family for p in chosen}

    log(f"bench of {cfg.bench.model} on the diagnostic set")
    b = cfg.bench
    run_bench(BenchConfig(model=b.model, model_args=b.model_args, suite=f"dir:{out / 'diagnostic' / 'tasks'}",
                          backend=cfg.backend, samples=b.samples, turns=b.turns, temperature=b.temperature,
                          max_tokens=b.max_tokens, seed=b.seed, workers=cfg.workers, verify=cfg.verify),
              out / "bench", progress=progress)

    log("mix")
    m = cfg.mix
    doc = build_mix(out / "tasks", out / "bench", out / "mix", size=m.size, seed=m.seed, floor=m.floor,
                    easy_scale=m.easy_scale, progress=progress)
    summary["mix"] = {f: round(info["share"], 4) for f, info in doc["families"].items()}

    s = cfg.solutions
    log(f"stages 2-3 with {s.model}")
    generate(Path(s.tasks) if s.tasks else out / "mix" / "tasks", out / "solutions" / "run", model=s.model,
             model_args=s.model_args, backend=cfg.backend, samples=s.samples, turns=s.turns,
             keep_optimizing=not s.stop_on_pass, metadata=s.metadata, six_step=s.six_step,
             temperature=s.temperature, max_tokens=s.max_tokens, seed=s.seed, workers=cfg.workers,
             verify=cfg.verify, progress=progress)
    summary["solutions"] = build_datasets(out / "solutions" / "run", out / "solutions", min_gain=s.min_gain,
                                          made_by=made_by, inputs={"model": s.model})

    r = cfg.rft
    log(f"RFT with {r.model}")
    generate(Path(r.tasks) if r.tasks else out / "mix" / "tasks", out / "rft" / "run", model=r.model,
             model_args=r.model_args, backend=cfg.backend, samples=r.samples, turns=1, keep_optimizing=False,
             metadata=r.metadata, six_step=r.six_step, temperature=r.temperature, max_tokens=r.max_tokens,
             seed=r.seed, workers=cfg.workers, verify=cfg.verify, progress=progress)
    summary["rft"] = build_rft(out / "rft" / "run", out / "rft", cap=r.cap, threshold=r.threshold,
                               made_by=made_by, inputs={"model": r.model})
    (out / "pipeline_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    write_data_manifest(out, files={"sft": f"solutions/{SFT_ROWS}", "rft": f"rft/{RFT_ROWS}", "tasks": "mix/tasks",
                                    "run": "solutions/run"},
                        inputs={"solutions_model": s.model, "rft_model": r.model}, info={"command": made_by})
    return summary
