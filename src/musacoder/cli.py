"""The `musacoder` command line. Heavy imports happen inside commands so `--help` stays fast."""

from __future__ import annotations

import typer

app = typer.Typer(help="musacoder: MooreEval kernel verifier, KernelBench runner and RL for kernel-writing LLMs.",
                  no_args_is_help=True, add_completion=False)


def _register_optional() -> None:
    """Sub-apps owned by other stages register themselves here (each module imports lightly)."""
    import importlib

    for mod in ("musacoder.judge.cli", "musacoder.bench.cli", "musacoder.rl.cli", "musacoder.data.cli",
                "musacoder.service.cli", "musacoder.port.cli"):
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:  # a stage not present in this checkout
            if e.name and e.name.startswith("musacoder"):
                continue
            raise
        module.register(app)


_register_optional()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
