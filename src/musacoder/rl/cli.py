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
    fresh: bool = typer.Option(False, "--fresh", help="Start over in the run directory: its earlier checkpoints "
                               "and metrics are removed (without it, a run there continues only when its recorded "
                               "settings agree)."),
) -> None:
    """Train a policy with GRPO + PrimeEcho + Buffered Dynamic Retry + MirrorPop on this machine."""
    from musacoder.config_files import cli_overrides
    from musacoder.rl.config import load_config
    from musacoder.rl.metrics import SinkUnavailable
    from musacoder.rl.rundir import ResumeError
    from musacoder.rl.trainer import train_from_config

    cfg = load_config(config, cli_overrides(set_, out_dir, fresh, {"run.steps": steps}))
    try:
        rows = train_from_config(cfg)
    except (ResumeError, SinkUnavailable) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from e
    for row in rows:
        typer.echo(format_row(row))
    out = Path(cfg.run.out_dir)
    typer.echo(f"metrics: {out / 'metrics.jsonl'}\nmodel: {out / 'final'} (pass {out} as the next stage's model)")


def format_row(row: dict) -> str:
    """One line per metrics row: a training step, with its evaluation when it has one; or the step-0 evaluation."""
    parts = [f"step {row['step']:>5}"]
    if "reward_mean" in row:
        parts.append(f"[{row['stage']}] reward {row['reward_mean']:+.3f} pass@1 {row['pass_first']:.2f} "
                     f"dropped {row['groups_dropped']}/{row['groups']} retry buf {row['retry_buffer']} "
                     f"replays {row['retry_replays']} popped {row['mirrorpop_popped']}/{row['mirrorpop_checked']}")
    if "eval/pass_at_1" in row:
        speedup = row["eval/speedup_mean"]
        parts.append(f"eval pass@1 {row['eval/pass_at_1']:.2f}"
                     + (f" speedup {speedup:.2f}x" if speedup is not None else ""))  # None: nothing timed
    return " ".join(parts)


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
