"""The `musacoder` command line. Heavy imports happen inside commands so `--help` stays fast."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

_app = typer.Typer(help="musacoder: MooreEval kernel verifier, KernelBench runner and RL for kernel-writing LLMs.",
                   no_args_is_help=True, add_completion=False)

# The sub-apps other stages own, and the top-level names each adds. A command line that names one of them imports only
# its module: several import torch (`musacoder.rl` does, through its package), which a command that does not need
# it should not wait for, and `verify` starts its worker's fork server before it imports torch itself.
OPTIONAL_GROUPS = {
    "musacoder.judge.cli": ("verify", "verify-batch"),
    "musacoder.bench.cli": ("bench", "report"),
    "musacoder.rl.cli": ("train",),
    "musacoder.data.cli": ("data",),
    "musacoder.service.cli": ("serve",),
    "musacoder.port.cli": ("port",),
}
_OWN = ("tasks", "doctor")
_registered: set[str] = set()


def _register_optional(modules=None) -> None:
    """Let the sub-apps in `modules` (default: all of `OPTIONAL_GROUPS`) register themselves, once each, then put this
    module's own commands last again (Typer keeps the last command registered under a name)."""
    import importlib

    for mod in OPTIONAL_GROUPS if modules is None else modules:
        if mod in _registered:
            continue
        _registered.add(mod)
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:  # a stage not present in this checkout
            if e.name and e.name.startswith("musacoder"):
                continue
            raise
        module.register(_app)
    for items in (_app.registered_commands, _app.registered_groups):
        items.sort(key=lambda c: c.name in _OWN)  # stable: only this module's own move to the end


def modules_for(argv: list[str]) -> list[str] | None:
    """The optional modules a command line needs: none for this module's own commands, the one that adds the command
    named, and all (None) for anything else (`--help`, no command, an unknown name: the help lists every command)."""
    name = next((a for a in argv if not a.startswith("-")), None)
    if name in _OWN:
        return []
    for mod, names in OPTIONAL_GROUPS.items():
        if name in names:
            return [mod]
    return None


def __getattr__(name: str):
    """`musacoder.cli.app`: the whole app, every optional group registered (for tests and embedding)."""
    if name == "app":
        _register_optional()
        return _app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# `tasks list` and `doctor`: `_register_optional` keeps them after the sub-apps' commands, so these are the ones the
# command line runs.
tasks_app = typer.Typer(help="List tasks (KernelBench layout or the shipped examples).", no_args_is_help=True)
_app.add_typer(tasks_app, name="tasks")


@tasks_app.command("list")
def tasks_list(
    kernelbench_dir: Optional[Path] = typer.Option(None, "--kernelbench-dir", envvar="KERNELBENCH_DIR",
                                                   help="KernelBench folder with level1/ level2/ …; default: the "
                                                        "shipped examples."),
    level: Optional[int] = typer.Option(None, "--level", help="Only this level."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """List problems with their size constants, one per line; names and sizes are never cut short."""
    import json

    from musacoder.tasks import TaskError, load_kernelbench_dir, load_task, size_constants

    try:
        if kernelbench_dir is None:
            examples = Path(__file__).resolve().parents[2] / "examples" / "tasks"
            tasks = [load_task(p) for p in sorted(examples.glob("*.py"))]
            if level is not None:
                tasks = [t for t in tasks if t.level == level]
        else:
            tasks = load_kernelbench_dir(kernelbench_dir, [level] if level else None)
    except TaskError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    if as_json:
        for t in tasks:
            typer.echo(json.dumps({"name": t.name, "level": t.level, "problem_id": t.problem_id, "path": t.path,
                                   "sizes": size_constants(t.source)}, default=str))
        return
    # plain columns, not a table fitted to the terminal: a name cut short cannot be passed back to --tasks
    rows = [(str(t.level if t.level is not None else "-"), t.name,
             ", ".join(f"{k}={v}" for k, v in size_constants(t.source).items())) for t in tasks]
    width = max((len(name) for _, name, _ in rows), default=4)
    typer.echo(f"{'level':<6} {'task':<{width}}  size constants")
    for lvl, name, sizes in rows:
        typer.echo(f"{lvl:<6} {name:<{width}}  {sizes}".rstrip())
    typer.echo(f"{len(tasks)} task(s)")


@_app.command("doctor")
def doctor() -> None:
    """What this host allows the sandbox, which isolation layers candidate workers will run in, which tools read
    built machine code, and what every extension imports under the installed torch (built once, kept in the build
    cache). Each check says on stderr what it is doing while it runs; the report goes to stdout."""
    from rich.console import Console

    status = Console(stderr=True)
    checks = [
        ("probing which isolation layers this host permits (a few child processes)", _doctor_isolation),
        ("looking for the tools that read built machine code", _doctor_tools),
        ("reading the glue baseline (a native build the first time in this environment)", _doctor_glue),
    ]
    for i, (what, check) in enumerate(checks, 1):
        with status.status(f"doctor [{i}/{len(checks)}]: {what}…"):
            text = check()
        typer.echo(text)


def _doctor_isolation() -> str:
    from musacoder.judge import isolation

    return isolation.doctor()


def _doctor_tools() -> str:
    from musacoder.legality.machine_code import tools_report

    return tools_report()


def _doctor_glue() -> str:
    from musacoder.config import default_cache_dir
    from musacoder.legality import glue

    return glue.report(default_cache_dir())


def main() -> None:
    _register_optional(modules_for(sys.argv[1:]))
    _app()


if __name__ == "__main__":
    main()
