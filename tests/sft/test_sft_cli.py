"""`musacoder train sft` through `musacoder.rl.cli.register`: the example config, errors, LoRA merged into final/."""

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from musacoder.rl.cli import register
from musacoder.sft.config import SFTConfig, load_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "sft" / "tiny_cpu.toml"


def app_with_train() -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def version() -> None:  # a second command so typer keeps `train` as a group
        pass

    register(app)
    return app


def test_example_config_loads_with_the_paper_defaults_elsewhere():
    cfg = load_config(EXAMPLE, {"train.epochs": 1})
    assert cfg.train.epochs == 1 and cfg.data.train == ["examples/sft/tiny_chat.jsonl"]
    assert (ROOT / cfg.data.train[0]).exists()
    default = SFTConfig()
    assert default.train.lr == 1e-5 and default.train.epochs == 1 and default.train.bf16 == "auto"
    with pytest.raises(Exception):
        SFTConfig.model_validate({"train": {"learning_rate": 1e-5}})  # typos are errors


def test_train_group_has_rl_and_sft():
    result = CliRunner().invoke(app_with_train(), ["train", "--help"])
    assert result.exit_code == 0 and " rl " in result.output and " sft " in result.output and " rft " in result.output


def test_train_rft_on_chat_rows_names_the_file_and_what_to_pass(tmp_path, monkeypatch):
    pytest.importorskip("trl", reason="trl is not installed: pip install -e '.[train]' (or .[dev])")
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app_with_train(), ["train", "rft", "--config", str(EXAMPLE), "--out-dir",
                                                   str(tmp_path / "run")])
    assert result.exit_code == 1
    assert "train rft: examples/sft/tiny_chat.jsonl#0: a row without `pool`" in result.output
    assert "musacoder data solutions|rft|pipeline" in result.output
    assert not (tmp_path / "run" / "config.json").exists()  # refused before anything was written


def test_missing_data_is_an_actionable_error(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[data]\ntrain = ["{tmp_path}/nope/*.parquet"]\n[run]\nout_dir = "{tmp_path}/run"\n')
    result = CliRunner().invoke(app_with_train(), ["train", "sft", "--config", str(cfg)])
    assert result.exit_code == 1 and "matches no file" in result.output


def test_cli_runs_the_example_with_lora_merged_into_final(tmp_path, monkeypatch):
    pytest.importorskip("trl", reason="trl is not installed: pip install -e '.[train]' (or .[dev])")
    pytest.importorskip("peft", reason="peft is not installed: pip install -e '.[train]' (or .[dev])")
    import torch
    from transformers import AutoModelForCausalLM

    from musacoder.sft.trainer import build_model, build_tokenizer

    monkeypatch.chdir(ROOT)  # the example names its data relative to the repository
    out = tmp_path / "run"
    result = CliRunner().invoke(app_with_train(), [
        "train", "sft", "--config", str(EXAMPLE), "--out-dir", str(out), "--epochs", "1",
        "--set", "data.limit=16", "--set", 'model.lora={"r": 4, "alpha": 8}'])
    assert result.exit_code == 0, result.output
    assert "sft rows 16" in result.output and f"hf:{out}" in result.output
    assert (out / "adapter" / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(out / "final")
    assert not any("lora" in name for name in merged.state_dict())
    base = build_model(load_config(EXAMPLE), build_tokenizer(load_config(EXAMPLE)))  # same seed, same init
    changed = [n for n, v in merged.state_dict().items() if not torch.equal(v, base.state_dict()[n])]
    assert changed and all("proj" in n for n in changed), changed  # only adapted linear layers moved
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in r for r in rows)

    # other settings in the same folder: the resume is refused with exit code 2, as `train rl` refuses it
    refused = CliRunner().invoke(app_with_train(), [
        "train", "sft", "--config", str(EXAMPLE), "--out-dir", str(out), "--epochs", "1",
        "--set", "data.limit=16", "--set", 'model.lora={"r": 8, "alpha": 8}'])
    assert refused.exit_code == 2, refused.output
    assert "model.lora" in refused.output and "--fresh" in refused.output
