"""`musacoder bench` and `musacoder report`. Heavy modules are imported inside the commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def _pairs(items: list[str] | None, what: str) -> dict:
    from musacoder.tasks import TaskError, parse_override

    out = {}
    for item in items or []:
        try:
            name, value = parse_override(item)
        except TaskError as e:
            raise typer.BadParameter(str(e).replace("--set", what)) from e
        out[name] = value
    return out


def bench(
    model: Annotated[str, typer.Option(help="openai:BASE_URL#MODEL, vllm:PATH_OR_NAME, hf:PATH or dir:PATH; hf:PATH "
                                       "takes a model folder or the output folder of `train sft|rft|rl`.")],
    out: Annotated[Path, typer.Option(help="Run directory (created; a rerun resumes it).")],
    suite: Annotated[str, typer.Option(help="kernelbench:level1[,level2,…], kernelbench, examples or dir:PATH.")] = "kernelbench:level1",
    kernelbench_dir: Annotated[Optional[str], typer.Option(envvar="KERNELBENCH_DIR", help="KernelBench root with level1/ … (default $KERNELBENCH_DIR).")] = None,
    tasks: Annotated[Optional[str], typer.Option(help="Comma-separated globs on task names, e.g. '1_*,19_ReLU'.")] = None,
    backend: Annotated[Optional[str], typer.Option(help="cuda, triton, cpu or musa (MUSA: needs torch_musa; eager baseline "
                                                    "only). Default: the backend the run directory was started with, "
                                                    "else cuda where a CUDA GPU is visible and cpu where none is.")] = None,
    samples: Annotated[int, typer.Option(min=1, help="Samples per task (k).")] = 8,
    turns: Annotated[int, typer.Option(min=1, help="Most responses per sample; feedback between turns.")] = 3,
    keep_optimizing: Annotated[bool, typer.Option(help="Continue after a passing turn instead of stopping.")] = False,
    temperature: Annotated[float, typer.Option(min=0.0)] = 0.7,
    top_p: Annotated[float, typer.Option()] = 1.0,
    max_tokens: Annotated[int, typer.Option(min=1, help="New tokens per response.")] = 16384,
    seed: Annotated[int, typer.Option(help="Base of the per-request sampling seeds.")] = 0,
    metadata: Annotated[bool, typer.Option(help="Add the reference's shape/stride/dtype metadata to the prompt.")] = False,
    few_shot: Annotated[bool, typer.Option(help="Add one worked example to the prompt.")] = False,
    set_: Annotated[Optional[list[str]], typer.Option("--set", help="Size override NAME=VALUE (repeatable), e.g. batch_size=16.")] = None,
    model_arg: Annotated[Optional[list[str]], typer.Option(help="Client option KEY=VALUE (repeatable), e.g. concurrency=32.")] = None,
    verify_arg: Annotated[Optional[list[str]], typer.Option(help="VerifyConfig field KEY=VALUE (repeatable), e.g. trials=3.")] = None,
    workers: Annotated[int, typer.Option(min=1, help="Parallel verifications.")] = 1,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bars.")] = False,
    verifier_url: Annotated[Optional[str], typer.Option("--verifier", help="URL of a `musacoder serve` endpoint to "
                                                        "verify with (token from $MUSACODER_SERVICE_TOKEN); default: here.")] = None,
) -> None:
    """Evaluate a model on KernelBench (or example tasks) through MooreEval; write responses, verdicts and reports."""
    from rich.console import Console

    from musacoder.bench.runner import BenchConfig, ResumeError, run_bench
    from musacoder.bench.suites import SuiteError, default_backend

    console = Console()
    if backend is None:
        backend, why = default_backend(out)
        console.print(f"bench: backend {backend} ({why})", soft_wrap=True)
    config = BenchConfig(
        model=model, model_args=_pairs(model_arg, "--model-arg"), suite=suite, kernelbench_dir=kernelbench_dir,
        tasks=[t.strip() for t in (tasks or "").split(",") if t.strip()], backend=backend, samples=samples,
        turns=turns, keep_optimizing=keep_optimizing, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
        seed=seed, metadata=metadata, few_shot=few_shot, overrides=_pairs(set_, "--set"), workers=workers,
        verify=_pairs(verify_arg, "--verify-arg"),
    )
    try:
        verifier = None
        if backend == "musa" and not verifier_url:  # refuse now, with the reason, rather than per verdict
            from musacoder.judge.devices import require_backend

            require_backend("musa")
        if verifier_url:  # `workers` is then how many jobs the client keeps queued: at least the server's --workers
            from musacoder.client import RemoteVerifier

            verifier = RemoteVerifier(verifier_url).verify_many
        summary = run_bench(config, out, progress=not no_progress, verifier=verifier)
    except (SuiteError, ResumeError, ValueError, FileNotFoundError, ImportError) as e:
        console.print(f"[red]bench: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    _print_summary(console, summary, out)


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `musacoder bench`, or a training run "
                                                 "folder (`train sft|rft|rl`: its curves).")],
    compare: Annotated[Optional[Path], typer.Option(help="Another run directory to compare against.")] = None,
    threshold: Annotated[float, typer.Option(help="Faster-rate speedup threshold.")] = 1.1,
    training: Annotated[Optional[Path], typer.Option(
        help="A training run folder whose curves (reward, pass@1, MirrorPop keep rate, retry buffer, KL) go beside "
        "the benchmark's plots; default: the folder the benchmarked model came from, if any.")] = None,
) -> None:
    """Write summary.json, report.md and report.html for a run (optionally side by side with another run); for a
    training run folder, training_report.md and .html with its curves."""
    from rich.console import Console

    from musacoder.bench.report import write_reports

    console = Console()
    try:
        summary = write_reports(run_dir, compare=compare, threshold=threshold, training=training)
    except FileNotFoundError as e:
        console.print(f"[red]report: {e}", soft_wrap=True)
        raise typer.Exit(2) from e
    if not summary:
        console.print(f"training curves: {run_dir / 'training_report.md'} and {run_dir / 'training_report.html'}",
                      soft_wrap=True)
        return
    _print_summary(console, summary, run_dir)


def _print_summary(console, summary: dict, out: Path) -> None:
    from rich.table import Table

    from musacoder.bench.report import metric_rows

    if not summary:
        return
    header, rows = metric_rows(summary)
    table = Table(*header, title=f"{summary['run']['model']} on {summary['run']['suite']} (rates in %)")
    for row in rows[:9]:
        table.add_row(*row)
    console.print(table)
    console.print(f"reports: {out / 'report.md'}, {out / 'report.html'}, {out / 'summary.json'}")


def register(app: typer.Typer) -> None:
    """Add `bench` and `report` to the main `musacoder` app."""
    app.command("bench")(bench)
    app.command("report")(report)
