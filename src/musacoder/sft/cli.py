"""`musacoder train sft|rft --config FILE`: SFT/RFT through TRL from the command line (torch, transformers and TRL
are imported inside the command so `--help` stays fast). Registered under `train` by `musacoder.rl.cli.register`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

_CONFIG = typer.Option(..., "--config", "-c", exists=True, dir_okay=False,
                       help="Run config (.toml, .yaml or .json); see docs/sft.md.")
_SET = typer.Option(None, "--set", help="Override a config key: --set train.lr=2e-5, --set data.train=runs/data "
                    "(values parsed as JSON when they can be).")
_OUT = typer.Option(None, "--out-dir", help="Run directory (overrides run.out_dir).")
_EPOCHS = typer.Option(None, "--epochs", help="Passes over the data (overrides train.epochs).")
_FRESH = typer.Option(False, "--fresh", help="Start over: remove the earlier run in the run directory "
                      "(checkpoints, final/, metrics, manifest).")


def _train(config: Path, set_: Optional[list[str]], out_dir: Optional[Path], epochs: Optional[int], fresh: bool,
           command: str, kind: str | None = None) -> None:
    from musacoder.config_files import cli_overrides
    from musacoder.rl.rundir import ResumeError
    from musacoder.sft.config import load_config
    from musacoder.sft.trainer import train_from_config

    overrides = cli_overrides(set_, out_dir, fresh, {"train.epochs": epochs})
    if kind is not None:
        overrides["data.kind"] = kind
    cfg = load_config(config, overrides)
    try:
        out = train_from_config(cfg)
    except ResumeError as e:
        # the run directory holds a run these settings cannot continue: a usage error, exit 2 (typer's code for bad
        # arguments) as in `train rl`
        typer.echo(f"train {command}: {e}", err=True)
        raise typer.Exit(2) from e
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        typer.echo(f"train {command}: {e}", err=True)
        raise typer.Exit(1) from e
    losses = [row["loss"] for row in out["log_history"] if "loss" in row]
    data = out["data"]
    kept = data["rows"] - data["dropped_too_long"]
    typer.echo(f"{data['kind']} rows {kept} (dropped {data['dropped_too_long']} too long, truncated "
               f"{data['truncated']}); loss {losses[0]:.3f} -> {losses[-1]:.3f} over {len(losses)} logged steps"
               if losses else f"{data['kind']}: nothing left to train (already at the configured epochs)")
    run = cfg.run.out_dir
    typer.echo(f"model: {out['final']}; next: musacoder train rl --config FILE --set model.name_or_path={run}, "
               f"or musacoder bench --model hf:{run} …")
    typer.echo(f"metrics: {Path(run) / 'metrics.jsonl'}")


def sft_command(config: Path = _CONFIG, set_: Optional[list[str]] = _SET, out_dir: Optional[Path] = _OUT,
                epochs: Optional[int] = _EPOCHS, fresh: bool = _FRESH) -> None:
    """Supervised fine-tuning (SFT, or RFT on pools) of a chat model with TRL's SFTTrainer."""
    _train(config, set_, out_dir, epochs, fresh, "sft")


def rft_command(config: Path = _CONFIG, set_: Optional[list[str]] = _SET, out_dir: Optional[Path] = _OUT,
                epochs: Optional[int] = _EPOCHS, fresh: bool = _FRESH) -> None:
    """RFT: `train sft` on the pools of `musacoder data rft` (data.kind = 'rft'), a new pool member each epoch."""
    _train(config, set_, out_dir, epochs, fresh, "rft", kind="rft")


def add_to_train_group(train_app: typer.Typer) -> None:
    """Add `sft` and `rft` to a `train` group, each unless a command of that name is already there."""
    have = {c.name for c in train_app.registered_commands}
    for name, command in (("sft", sft_command), ("rft", rft_command)):
        if name not in have:
            train_app.command(name)(command)
