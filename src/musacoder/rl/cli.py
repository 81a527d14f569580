"""`musacoder train rl --config FILE`: the embedded GRPO trainer from the command line (torch/transformers are
imported inside the command so `--help` stays fast)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def rl_command(
    config: Path = typer.Option(..., "--config", "-c", exists=True, dir_okay=False,
                                help="Run config (.toml, .yaml or .json); see docs/rl.md."),
    set_: Optional[list[str]] = typer.Option(None, "--set", help="Override a config key: --set run.steps=10 "
                                             "(values parsed as JSON when they can be)."),
    out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="Run directory (overrides run.out_dir)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Training steps (overrides run.steps)."),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore checkpoints in the run directory."),
) -> None:
    """Train a policy with GRPO + PrimeEcho + Buffered Dynamic Retry + MirrorPop on this machine."""
    from musacoder.config_files import cli_overrides
    from musacoder.rl.config import load_config
    from musacoder.rl.trainer import train_from_config

    cfg = load_config(config, cli_overrides(set_, out_dir, fresh, {"run.steps": steps}))
    rows = train_from_config(cfg)
    for row in rows:
        typer.echo(
            f"step {row['step']:>5} [{row['stage']}] reward {row['reward_mean']:+.3f} "
            f"pass@1 {row['pass_first']:.2f} dropped {row['groups_dropped']}/{row['groups']} "
            f"retry buf {row['retry_buffer']} replays {row['retry_replays']} "
            f"popped {row['mirrorpop_popped']}/{row['mirrorpop_checked']}")
    typer.echo(f"metrics: {Path(cfg.run.out_dir) / 'metrics.jsonl'}")


def register(app: typer.Typer) -> None:
    """Add `train rl` and `train sft` (musacoder.sft.cli) to the main app, joining an existing `train` group if
    another stage registered one."""
    from musacoder.sft.cli import add_to_train_group

    for group in app.registered_groups:
        if group.name == "train" and group.typer_instance is not None:
            group.typer_instance.command("rl")(rl_command)
            add_to_train_group(group.typer_instance)
            return
    train_app = typer.Typer(help="Train policies (SFT/RFT: `train sft --config FILE`; RL: `train rl --config FILE`).",
                            no_args_is_help=True)
    train_app.command("rl")(rl_command)
    add_to_train_group(train_app)
    app.add_typer(train_app, name="train")
