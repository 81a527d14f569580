"""`musacoder data tasks` and `musacoder data decontam`. Heavy modules are imported inside the commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

DEFAULT_KERNELBENCH = "/work/shared/kernelbench"


def tasks(
    out: Annotated[Path, typer.Option(help="Folder for the task files and manifest.jsonl (a rerun resumes it).")],
    count: Annotated[int, typer.Option(min=1, help="Candidates to generate and execute (kept + rejected).")] = 60,
    seed: Annotated[int, typer.Option(help="Generation seed; also seeds the checks' weights and inputs.")] = 0,
    scale: Annotated[float, typer.Option(min=0.01, help="Multiplies every size (1: CPU-sized; odd sizes stay odd).")] = 1.0,
    families: Annotated[Optional[str], typer.Option(help="Comma-separated catalogue families and/or 'graph' (default: all).")] = None,
    graph_fraction: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of random-graph candidates.")] = 0.5,
    max_forward_s: Annotated[float, typer.Option(help="Reject a task whose forward takes longer (CPU, one thread).")] = 2.0,
    max_footprint_mib: Annotated[float, typer.Option(help="Reject a task whose inputs+outputs+parameters exceed this.")] = 512.0,
    timeout_s: Annotated[float, typer.Option(help="Kill the check of one candidate after this long.")] = 60.0,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Stage 1: synthesise KernelBench-format tasks (catalogue variants and random operator graphs), execute each
    before keeping it, and log every candidate with its reason in OUT/manifest.jsonl."""
    from rich.console import Console

    from musacoder.data.check import CheckLimits
    from musacoder.data.synth import SynthConfig, synthesize

    console = Console()
    try:
        config = SynthConfig(
            count=count, seed=seed, scale=scale, graph_fraction=graph_fraction,
            families=[f.strip() for f in (families or "").split(",") if f.strip()],
            limits=CheckLimits(max_forward_s=max_forward_s, max_footprint_bytes=int(max_footprint_mib * 2**20),
                               timeout_s=timeout_s),
        )
        summary = synthesize(config, out, progress=not no_progress)
    except ValueError as e:
        console.print(f"[red]data tasks: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    rate = summary.kept / summary.candidates if summary.candidates else 0.0
    console.print(f"kept {summary.kept}/{summary.candidates} ({rate:.0%}) in {out}; manifest {summary.manifest}")
    if summary.reasons:
        console.print("rejected: " + ", ".join(f"{k} {v}" for k, v in summary.reasons.items()))
    console.print("families: " + ", ".join(f"{k} {v}" for k, v in summary.families.items()))


def decontam(
    input_dir: Annotated[Path, typer.Argument(help="Folder of task files to check (searched recursively).")],
    report: Annotated[Path, typer.Option(help="Where to write the JSON report (one object per input task).")],
    against: Annotated[Optional[Path], typer.Option(envvar="KERNELBENCH_DIR", help=f"Reference task folder, searched recursively (default $KERNELBENCH_DIR or {DEFAULT_KERNELBENCH}).")] = None,
    threshold: Annotated[float, typer.Option(help="Combined-score threshold.")] = 0.6,
    structure_threshold: Annotated[float, typer.Option(help="Structure-similarity threshold.")] = 0.95,
    no_trace: Annotated[bool, typer.Option("--no-trace", help="Text similarity only: execute no task code.")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
) -> None:
    """Flag input tasks that copy (or run the same program as) a task of the reference folder; write a report
    [{file, contaminated, match, score, structure, text, traced}, …]."""
    from rich.console import Console

    from musacoder.data.decontam import DecontamConfig, decontaminate

    console = Console()
    against = against or Path(DEFAULT_KERNELBENCH)
    config = DecontamConfig(threshold=threshold, structure_threshold=structure_threshold, trace=not no_trace)
    try:
        rows = decontaminate(input_dir, against, config, progress=not no_progress)
    except FileNotFoundError as e:
        console.print(f"[red]data decontam: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps([r.model_dump() for r in rows], indent=1) + "\n")
    flagged = sum(r.contaminated for r in rows)
    console.print(f"{flagged}/{len(rows)} contaminated (against {against}); report {report}")


def register(app: typer.Typer) -> None:
    data = typer.Typer(help="Training data: stage 1 task synthesis and decontamination.", no_args_is_help=True)
    data.command("tasks")(tasks)
    data.command("decontam")(decontam)
    app.add_typer(data, name="data")
