"""`musacoder port kernelbench` and `musacoder port candidate`: the CUDA → MUSA port from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

EXIT_USAGE = 2
EXIT_INCOMPLETE = 1

port_app = typer.Typer(help="Port KernelBench tasks or CUDA candidates to MUSA (torch_musa).", no_args_is_help=True)


def _check_target(to: str) -> None:
    if to != "musa":
        typer.echo(f"error: --to must be musa, got {to!r}", err=True)
        raise typer.Exit(EXIT_USAGE)


@port_app.command("kernelbench")
def kernelbench(
    kernelbench_dir: Annotated[Path, typer.Option(envvar="KERNELBENCH_DIR", help="KernelBench root with level1/ … .")],
    out: Annotated[Path, typer.Option("--out", help="Output root: the same levelN/ tree plus port_report.json.")],
    to: Annotated[str, typer.Option("--to", help="Target: musa.")] = "musa",
    levels: Annotated[str, typer.Option(help="Comma-separated levels.")] = "1,2,3",
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Port every task file of KernelBench levels 1–3 to MUSA; exit 1 when some file could not be ported."""
    from musacoder.port.kernelbench import port_tree

    _check_target(to)
    if not (kernelbench_dir / "level1").is_dir():
        typer.echo(f"error: {kernelbench_dir} has no level1/ (expected the KernelBench root)", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        lv = tuple(int(x) for x in levels.split(",") if x.strip())
        result = port_tree(kernelbench_dir, out, lv)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_USAGE) from e
    summary = result.summary()
    if json_out:
        typer.echo(json.dumps(summary, indent=1, ensure_ascii=False))
    else:
        typer.echo(f"ported {summary['ported']}/{summary['files']} task files to {out} "
                   f"({summary['changed']} changed, {summary['files'] - summary['changed']} had no CUDA-specific code)")
        for path, why in summary["not_ported"].items():
            typer.echo(f"  not ported: {path}: {why}")
        if summary["unmapped"]:
            typer.echo(f"  unmapped names: {', '.join(summary['unmapped'])}")
        typer.echo(f"report: {out / 'port_report.json'}")
    if result.not_ported:
        raise typer.Exit(EXIT_INCOMPLETE)


@port_app.command("candidate")
def candidate(
    file: Annotated[Path, typer.Argument(help="A CUDA candidate (Python file with load_inline CUDA sources).")],
    to: Annotated[str, typer.Option("--to", help="Target: musa.")] = "musa",
    report: Annotated[Optional[Path], typer.Option(help="Also write the port report (JSON) here.")] = None,
) -> None:
    """Print the MUSA version of a candidate on stdout; the report (and any unmapped name) goes to stderr.
    Exit 1 when something was left unmapped."""
    from musacoder.port.kernelbench import port_source

    _check_target(to)
    if not file.is_file():
        typer.echo(f"error: candidate file not found: {file}", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        out, rep = port_source(file.read_text(), str(file))
    except (SyntaxError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(EXIT_USAGE) from e
    typer.echo(out, nl=False)
    if report is not None:
        report.write_text(json.dumps(rep.as_dict(), indent=1, ensure_ascii=False))
    typer.echo(f"port: {sum(rep.mapped.values())} rewrites", err=True)
    if rep.unmapped:
        typer.echo(f"port: unmapped (left as is): {', '.join(sorted(rep.unmapped))}", err=True)
        raise typer.Exit(EXIT_INCOMPLETE)


def register(app: typer.Typer) -> None:
    """Add `port` to the main `musacoder` app."""
    app.add_typer(port_app, name="port")
