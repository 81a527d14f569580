"""`musacoder train rl --config FILE` through `musacoder.rl.cli.register`."""

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from musacoder.rl.cli import register
from musacoder.rl.metrics import read_metrics

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rl" / "tiny_cpu.toml"


def test_train_rl_runs_the_example_for_two_steps(tmp_path):
    pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[train]' (or .[dev])")
    app = typer.Typer()

    @app.command()
    def version() -> None:  # a second command so typer keeps `train` as a group
        pass

    register(app)
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "rl", "--config", str(EXAMPLE), "--out-dir", str(out),
                                      "--set", "run.steps=2", "--set", "run.tensorboard=false"])
    assert result.exit_code == 0, result.output
    assert "step     2 [single_turn]" in result.output
    assert [r["step"] for r in read_metrics(out)] == [0, 1, 2]  # step 0: the evaluation before training


def test_register_joins_an_existing_train_group():
    app = typer.Typer()
    train = typer.Typer()

    @train.command("sft")
    def sft() -> None:
        pass

    app.add_typer(train, name="train")
    register(app)
    assert [g.name for g in app.registered_groups] == ["train"]
    assert {"sft", "rl"} <= {c.name for c in train.registered_commands}


def test_train_rl_refuses_a_changed_run_and_names_the_way_on(tmp_path):
    pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[train]' (or .[dev])")
    app = typer.Typer()

    @app.command()
    def version() -> None:
        pass

    register(app)
    out = tmp_path / "run"
    base = ["train", "rl", "--config", str(EXAMPLE), "--out-dir", str(out), "--set", "run.steps=1",
            "--set", "run.eval_every=1", "--set", "run.eval_samples=1"]
    first = CliRunner().invoke(app, base)
    assert first.exit_code == 0, first.output
    assert "step     0 eval pass@1" in first.output and "(pass " in first.output
    changed = CliRunner().invoke(app, base + ["--set", "grpo.lr=0.01"])
    assert changed.exit_code == 2
    assert "grpo.lr: 0.002 there, 0.01 now" in changed.output and "--fresh" in changed.output
    fresh = CliRunner().invoke(app, base + ["--set", "grpo.lr=0.01", "--fresh"])
    assert fresh.exit_code == 0, fresh.output
