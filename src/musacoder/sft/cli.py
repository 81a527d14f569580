"""`musacoder train sft --config FILE`: SFT/RFT through TRL from the command line (torch, transformers and TRL are
imported inside the command so `--help` stays fast). Registered under `train` by `musacoder.rl.cli.register`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def sft_command(
    config: Path = typer.Option(..., "--config", "-c", exists=True, dir_okay=False,
                                help="Run config (.toml, .yaml or .json); see docs/sft.md."),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Override a config key: --set train.lr=2e-5 "
                                             "(values parsed as JSON when they can be)."),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Run directory (overrides run.out_dir)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Passes over the data (overrides train.epochs)."),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore checkpoints in the run directory."),
) -> None:
    """Supervised fine-tuning (SFT, or RFT on pools) of a chat model with TRL's SFTTrainer."""
    from musacoder.config_files import cli_overrides
    from musacoder.sft.config import load_config
    from musacoder.sft.trainer import train_from_config

    cfg = load_config(config, cli_overrides(set_, out_dir, fresh, {"train.epochs": epochs}))
    try:
        out = train_from_config(cfg)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        typer.echo(f"train sft: {e}", err=True)
        raise typer.Exit(1) from e
    losses = [row["loss"] for row in out["log_history"] if "loss" in row]
    data = out["data"]
    kept = data["rows"] - data["dropped_too_long"]
    typer.echo(f"{data['kind']} rows {kept} (dropped {data['dropped_too_long']} too long, truncated "
               f"{data['truncated']}); loss {losses[0]:.3f} -> {losses[-1]:.3f} over {len(losses)} logged steps"
               if losses else f"{data['kind']}: nothing left to train (already at the configured epochs)")
    typer.echo(f"final model: {out['final']}  (train rl: model.name_or_path; bench: --model hf:{out['final']})")
    typer.echo(f"metrics: {Path(cfg.run.out_dir) / 'metrics.jsonl'}")


def add_to_train_group(train_app: typer.Typer) -> None:
    """Add `sft` to a `train` group unless a command of that name is already there."""
    if "sft" not in {c.name for c in train_app.registered_commands}:
        train_app.command("sft")(sft_command)
