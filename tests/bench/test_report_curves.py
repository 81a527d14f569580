"""Training curves in reports: series from a synthetic metrics.jsonl, missing ones named, HTML with plots, and the
curves of the trained model beside a benchmark's plots."""

import json
import math

import pytest
from bench_helpers import FIXTURES, SCRIPT, FakeVerifier, ScriptedClient

from musacoder.bench.report import (
    is_training_run,
    load_training_metrics,
    training_curves,
    training_run_of_model,
    write_reports,
    write_training_report,
)
from musacoder.bench.runner import BenchConfig, run_bench


def rl_rows(n=6):
    rows = []
    for s in range(1, n + 1):
        rows.append({"step": s, "stage": "multi_turn", "reward_mean": 0.1 * s, "pass_first": 0.05 * s,
                     "pass_any": 0.08 * s, "retry_buffer": s, "mirrorpop_checked": 20, "mirrorpop_popped": s,
                     "kl": 0.01 * s, "loss": float("nan") if s == 3 else -0.5})
    rows[2]["eval/pass_at_1"] = 0.25  # held-out evaluations on some steps only
    rows[5]["eval/pass_at_1"] = 0.5
    return rows


def write_metrics(folder, rows, torn_tail=False):
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (folder / "metrics.jsonl").write_text(text + ('{"step": 99, "rew' if torn_tail else ""))
    return folder


def test_rl_series_and_derived_keep_rate():
    panels, notes = training_curves(rl_rows())
    xs, ys = panels["MirrorPop keep rate"]["kept / checked sequences"]
    assert xs == [1, 2, 3, 4, 5, 6] and ys == pytest.approx([1 - s / 20 for s in range(1, 7)])
    assert panels["Retry buffer size"]["entries after the step"][1] == [1, 2, 3, 4, 5, 6]
    assert panels["pass@1"]["held-out pass@1"] == ([3, 6], [0.25, 0.5])
    assert set(panels["pass@1"]) == {"held-out pass@1", "batch: first turn passes", "batch: any turn passes"}
    assert panels["KL to the reference policy"]["k3 KL"][1][-1] == pytest.approx(0.06)
    assert panels["Loss"]["loss"][0] == [1, 2, 4, 5, 6]  # the NaN point is left out
    assert "Learning rate" not in panels
    logged = [{**r, "mirrorpop_keep_rate": 0.5} for r in rl_rows()]  # the trainer's own figure wins
    assert training_curves(logged)[0]["MirrorPop keep rate"]["kept / checked sequences"][1] == [0.5] * 6
    assert any("learning_rate" in n for n in notes) and any("eval_pass1" in n for n in notes)


def test_sft_rows_skip_the_rl_series_with_notes():
    rows = [{"step": s, "loss": 2.0 / s, "learning_rate": 1e-5, "grad_norm": 1.0, "epoch": s / 4} for s in (1, 2, 3)]
    panels, notes = training_curves(rows)
    assert set(panels) == {"Loss", "Learning rate"}
    # SFT's held-out evaluation rows (musacoder.sft.evaluate) carry RL's key and are plotted as pass@1 too
    evaluated, _ = training_curves(rows + [{"step": 3, "eval/pass_at_1": 0.5, "eval/speedup_mean": None}])
    assert evaluated["pass@1"] == {"held-out pass@1": ([3], [0.5])}
    for key in ("reward_mean", "retry_buffer", "kl", "mirrorpop_popped / mirrorpop_checked"):
        assert any(f"`{key}`" in n for n in notes), key


def test_training_report_of_a_run_folder(tmp_path):
    pytest.importorskip("matplotlib")
    run = write_metrics(tmp_path / "rl", rl_rows(), torn_tail=True)
    (run / "config.json").write_text("{}")  # an RL run has a config.json too: still not a benchmark run
    assert is_training_run(run) and len(load_training_metrics(run)) == 6  # the torn last line is skipped
    assert write_reports(run) == {}
    page = (run / "training_report.html").read_text()
    assert page.count("data:image/png;base64,") == 6  # reward, pass@1, keep rate, buffer, KL, loss
    md = (run / "training_report.md").read_text()
    assert "| MirrorPop keep rate | kept / checked sequences | 6 | 0.95 | 0.7 | 0.7 | 0.95 |" in md
    assert "learning_rate" in md  # the missing series is named
    summary = write_training_report(run)
    assert summary["rows"] == 6 and summary["series"]["Reward"]["batch mean reward"]["last"] == pytest.approx(0.6)


def test_missing_metrics_is_an_actionable_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="train rl"):
        load_training_metrics(tmp_path)
    assert training_run_of_model(f"hf:{tmp_path}/final") is None
    assert training_run_of_model("openai:http://x#m") is None


def test_bench_report_shows_the_trained_models_curves(tmp_path):
    pytest.importorskip("matplotlib")
    rl = write_metrics(tmp_path / "rl", rl_rows())
    (rl / "final").mkdir()
    assert training_run_of_model(f"hf:{rl / 'final'}") == rl
    out = tmp_path / "bench"
    config = BenchConfig(model="dir:unused", suite=f"dir:{FIXTURES / 'tasks'}", backend="cpu", samples=3, turns=3,
                         verify={"time_compile_baseline": True})
    run_bench(config, out, client=ScriptedClient(SCRIPT), verifier=FakeVerifier(), progress=False)
    plain = (out / "report.html").read_text()
    assert "Training curves" not in plain  # a dir: model has no training run
    summary = write_reports(out, training=rl)
    assert summary["overall"]["n_samples"] > 0
    page = (out / "report.html").read_text()
    assert "Training curves" in page and "MirrorPop keep rate" in page
    assert page.count("data:image/png;base64,") == 3 + 6  # the benchmark's three plots and six curves
    assert "## Training curves" in (out / "report.md").read_text()
    assert not math.isnan(summary["overall"]["pass_at_k"])


def test_report_command_on_a_training_folder_names_the_curves_it_wrote(tmp_path):
    from typer.testing import CliRunner

    from musacoder.cli import app

    run = write_metrics(tmp_path / "rl", rl_rows())
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert "training_report.md" in result.output and (run / "training_report.html").is_file()
