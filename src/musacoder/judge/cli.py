"""CLI commands of MooreEval: `verify`, `verify-batch` (`tasks list` and `doctor` are in musacoder.cli)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

EXIT_USAGE = 2
EXIT_INFRA = 3


def _fail(msg: str, code: int = EXIT_USAGE):
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def _parse_sets(sets: list[str]) -> dict:
    from musacoder.tasks import TaskError, parse_override

    out = {}
    for s in sets:
        try:
            k, v = parse_override(s)
        except TaskError as e:
            _fail(str(e))
        out[k] = v
    return out


def register(app: typer.Typer) -> None:
    """Add MooreEval's commands to the `musacoder` app."""
    # `tasks list` and `doctor` are musacoder.cli's own commands
    app.command("verify")(verify_cmd)
    app.command("verify-batch")(verify_batch_cmd)


REQUIRE_SANDBOX_HELP = "Refuse to verify unless every isolation layer is active here (see `musacoder doctor`)."


def verify_cmd(
    task: Path = typer.Option(..., "--task", help="Problem file in KernelBench format."),
    candidate: Path = typer.Option(..., "--candidate", help="Raw model response or plain code."),
    backend: Optional[str] = typer.Option(None, "--backend", help="cpu | triton | cuda | musa (default: what the code shows; musa needs torch_musa)."),
    sets: list[str] = typer.Option([], "--set", help="Size override NAME=VALUE (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object on stdout."),
    trials: int = typer.Option(5, "--trials", help="Correctness trials."),
    no_timing: bool = typer.Option(False, "--no-timing", help="Skip the timing stage."),
    baseline: str = typer.Option("eager", "--baseline", help="Speedup in the reward against eager or compile."),
    allow_vendor_libs: bool = typer.Option(False, "--allow-vendor-libs", help="Allow cuBLAS/cuDNN (strict: forbidden)."),
    timeout: float = typer.Option(180.0, "--timeout", help="Run time limit in seconds."),
    extra_shapes: list[str] = typer.Option([], "--extra-shape",
                                           help="Also check at these sizes, e.g. 'batch_size=3,dim=77' (repeatable)."),
    require_sandbox: bool = typer.Option(False, "--require-sandbox", help=REQUIRE_SANDBOX_HELP),
):
    """Verify one candidate against one task; exit 0 whenever a verdict was reached, 2 for unusable arguments
    (before any work), 3 when the verifier itself failed (docs/errors.md)."""
    from musacoder.config import VerifyConfig

    task_obj, text, overrides, shapes = _verify_inputs(task, candidate, backend, baseline, sets, extra_shapes)
    _check_sandbox(require_sandbox)
    cfg = VerifyConfig(trials=trials, time_candidate=not no_timing, baseline=baseline,
                       allow_vendor_libs=allow_vendor_libs, timeout_s=timeout, require_sandbox=require_sandbox,
                       extra_shapes=shapes)
    _start_worker_server(cfg, backend, text)
    from musacoder.judge.pipeline import verify  # torch: imported while the worker's fork server starts

    try:
        v = verify(task_obj, text, backend=backend, config=cfg)
    except ValueError as e:  # TaskError is one: an argument found unusable inside verify
        _fail(str(e))
    if as_json:
        sys.stdout.write(v.model_dump_json() + "\n")
    else:
        _print_verdict(v)
    if v.status == "infra_error":
        raise typer.Exit(EXIT_INFRA)


def _start_worker_server(cfg, backend: str | None, text: str) -> None:
    """Start the fork server the candidate's worker will come from before this process imports torch and runs the
    static checks, so the two starts overlap (each is about a Python-and-torch start). Only for the CPU backend, whose
    worker configuration is known here (`stages.rpc.open_worker`: no toolchain variables); a GPU backend's depends on
    the device the verification is given, and its server starts when the sandbox asks for it, as before. A guess
    that turns out wrong (the extracted code shows another backend, or no worker is needed) costs an unused server,
    killed at exit; the verdict is the same. The server is kept for the next call (`forkserver.keep_wanted`:
    `MUSACODER_FORK_SERVER_KEEP=0` turns that off), which then finds it ready."""
    from musacoder.candidates import infer_backend
    from musacoder.judge.forkserver import keep_wanted
    from musacoder.judge.sandbox import start_fork_server

    guess = backend or infer_backend(text) or "cpu"
    if guess != "cpu" or (cfg.device or "cpu") != "cpu":
        return
    try:
        start_fork_server(cfg.cache_dir, {}, cfg.isolate_network, keep=keep_wanted())
    except OSError:  # the sandbox starts it (and reports a failure) when it needs it
        pass


def _verify_inputs(task: Path, candidate: Path, backend, baseline: str, sets: list[str], extra_shapes: list[str]):
    """Check every argument of `verify` before any work: the backend and baseline names, the task file (readable,
    KernelBench format, overrides naming its constants with values of their kind, extra shapes too) and the
    candidate file (readable). Returns (task, response text, overrides, extra shapes); exits 2 on the first problem."""
    from musacoder.candidates import read_response
    from musacoder.records import BACKENDS
    from musacoder.tasks import TaskError, check_overrides, load_task

    if backend is not None and backend not in BACKENDS:
        _fail(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if baseline not in ("eager", "compile"):
        _fail("--baseline must be eager or compile")
    overrides = _parse_sets(sets)
    shapes = [_parse_sets(x.split(",")) for x in extra_shapes]
    try:
        t = load_task(task, overrides)
        for extra in shapes:
            check_overrides(t.source, {**overrides, **extra}, f"--extra-shape in {task}")
    except TaskError as e:
        _fail(str(e))
    if not candidate.is_file():
        _fail(f"candidate file not found: {candidate}")
    try:
        text = read_response(candidate)
    except OSError as e:
        _fail(f"candidate file cannot be read: {candidate} ({e.strerror or e})")
    return t, text, overrides, shapes


def verify_batch_cmd(
    manifest: Path = typer.Argument(..., help="JSONL: id, task, candidate, backend[, set]."),
    out: Path = typer.Option(..., "--out", help="Results JSONL (appended; a rerun skips done ids)."),
    workers: int = typer.Option(max(1, (os.cpu_count() or 2) // 2), "--workers", help="Verifications in flight."),
    trials: int = typer.Option(5, "--trials"),
    no_timing: bool = typer.Option(False, "--no-timing"),
    require_sandbox: bool = typer.Option(False, "--require-sandbox", help=REQUIRE_SANDBOX_HELP),
    reuse_reference: Optional[float] = typer.Option(
        None, "--reuse-stored-reference", metavar="SECONDS", min=1e-9,
        help="Opt-in: take each task's clean reference timing from an earlier run's store (under the build cache) "
             "when at most SECONDS old, and store this run's for later ones."),
):
    """Verify a manifest of candidates with a pool of sandboxed workers."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from musacoder.config import VerifyConfig
    from musacoder.judge.batch import ManifestError, done_ids, read_manifest, verify_batch

    if not manifest.is_file():
        _fail(f"manifest not found: {manifest}")
    _check_sandbox(require_sandbox)
    try:
        total = len(read_manifest(manifest))
    except ManifestError as e:
        _fail(str(e))
    already = len(done_ids(out) & {r.id for r in read_manifest(manifest)})
    counts: dict[str, int] = {}
    with Progress(TextColumn("verify"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), transient=False) as prog:
        bar = prog.add_task("", total=total, completed=already)

        def on_result(_id, v):
            counts[v.status] = counts.get(v.status, 0) + 1
            prog.update(bar, advance=1, description=" ".join(f"{k}:{n}" for k, n in sorted(counts.items())))

        cfg = VerifyConfig(trials=trials, time_candidate=not no_timing, require_sandbox=require_sandbox,
                           stored_reference_max_age_s=reuse_reference)
        n = verify_batch(manifest, out, workers=workers, config=cfg, on_result=on_result)
    typer.echo(f"{n} new result(s), {already} already in {out}")


def _print_verdict(v) -> None:
    from rich.console import Console

    c = Console()
    color = "green" if v.status == "ok" else "red"
    c.print(f"[bold {color}]{v.status}[/]  reward {_reward_text(v.reward)}  pass {v.pass_fraction:.2f}  "
            f"speedup {('%.3gx' % v.speedup) if v.speedup is not None else '-'}")
    c.print("stages: " + "  ".join(f"{k}={s}" for k, s in v.stages.items()))
    c.print(v.feedback, markup=False, highlight=False)


def _reward_text(reward: float | None) -> str:
    return "none (verifier fault)" if reward is None else f"{reward:+.3f}"


def _check_sandbox(required: bool) -> None:
    """With --require-sandbox, exit 2 before anything runs where this host does not permit every isolation layer."""
    if not required:
        return
    from musacoder.judge import isolation

    lacking = isolation.missing(isolation.layers())
    if lacking:
        typer.echo(isolation.doctor(), err=True)
        _fail(f"--require-sandbox: this host does not permit {', '.join(lacking)}")
