"""The diagnostic mix: aten ops → families, task labels from profiled references, the weight rule against
hand-computed values, balanced sets, pass rates read from a bench run, and the `data mix` outputs."""

from __future__ import annotations

import json
import shutil

import pytest
from data_helpers import EXAMPLE_TASKS, ScriptedVerifier, write_responses

from musacoder.data.families import families_of, op_family, profile_ops, task_family
from musacoder.data.mix import (TaskProfile, balanced_set, build_mix, draw_mix, family_pass_rates, family_weights,
                                task_weights)
from musacoder.tasks import load_task


def test_op_families():
    assert op_family("addmm") == "gemm" and op_family("convolution") == "conv"
    assert op_family("native_layer_norm") == "normalization" and op_family("_softmax") == "softmax"
    assert op_family("max_pool2d") == "pooling" and op_family("gather") == "indexing"
    assert op_family("sum") == "reduction" and op_family("gelu") == "elementwise"
    assert op_family("view") is None and op_family("empty_like") is None
    assert op_family("add", [[8, 4], [4]]) == "broadcast"
    assert op_family("add", [[8, 4], [8, 4]]) == "elementwise"
    assert op_family("mul", [[8, 4], []]) == "elementwise"  # a scalar operand is not a broadcast
    assert task_family(["elementwise", "reduction", "gemm"]) == "gemm"
    assert task_family(["elementwise", "broadcast"]) == "broadcast" and task_family([]) == "other"


@pytest.mark.parametrize("name, family, ops", [("relu.py", "elementwise", ["relu"]),
                                               ("linear_gelu.py", "gemm", ["linear", "gelu"]),
                                               ("scale_bias_sum.py", "reduction", None)])
def test_profiled_task_family(name, family, ops):
    profiled = profile_ops(load_task(EXAMPLE_TASKS / name))
    assert task_family(families_of(profiled)) == family
    if ops:
        assert [op for op, _ in profiled] == ops  # outermost ops only: linear, not the addmm inside it


ITEM_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * x.max().item()


n = {n}


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
"""


def test_profiles_on_meta_and_falls_back_to_small_cpu_runs(tmp_path):
    task = load_task(EXAMPLE_TASKS / "linear_gelu.py")
    assert profile_ops(task, device="meta") == profile_ops(task, device="cpu")
    small, large = tmp_path / "item_small.py", tmp_path / "item_large.py"
    small.write_text(ITEM_TASK.format(n=64))
    large.write_text(ITEM_TASK.format(n=1 << 25))
    with pytest.raises(Exception):
        profile_ops(load_task(small), device="meta")  # .item() has no meta kernel
    assert [op for op, _ in profile_ops(load_task(small))] == ["max", "item", "mul"]
    with pytest.raises(ValueError, match="no meta kernel.*profile a smaller copy"):
        profile_ops(load_task(large))


def test_family_weights_hand_computed():
    # raw: gemm 1-0.2+0.1 = 0.9; elementwise (1-0.9+0.1)·0.5 = 0.1; conv 1.1; total 2.1
    w = family_weights({"gemm": 0.2, "elementwise": 0.9, "conv": 0.0}, ["gemm", "elementwise", "conv"])
    assert w == pytest.approx({"gemm": 0.9 / 2.1, "elementwise": 0.1 / 2.1, "conv": 1.1 / 2.1})
    # an unmeasured family takes the mean rate (0.5): raw (0.5+0.1) = 0.6 next to gemm 0.9
    w = family_weights({"gemm": 0.2, "conv": 0.8}, ["gemm", "softmax"])
    assert w == pytest.approx({"gemm": 0.9 / 1.5, "softmax": 0.6 / 1.5})
    with pytest.raises(ValueError, match="raise --floor"):
        family_weights({"gemm": 1.0}, ["gemm"], floor=0.0)
    with pytest.raises(ValueError, match="no measured family"):
        family_weights({}, ["gemm"])


def test_task_weights_split_family_share():
    w = task_weights({"a": "gemm", "b": "gemm", "c": "conv"}, {"gemm": 0.6, "conv": 0.4})
    assert w == pytest.approx({"a": 0.3, "b": 0.3, "c": 0.4})
    draws = draw_mix(w, 2000, seed=0)
    assert draws == draw_mix(w, 2000, seed=0)
    assert abs(draws.count("c") / 2000 - 0.4) < 0.05


def test_balanced_set():
    profiles = [TaskProfile(file=f"{f}{i}.py", sha256=str(i), family=f) for f in ("gemm", "conv", "error")
                for i in range(5)] + [TaskProfile(file="e0.py", sha256="x", family="elementwise")]
    chosen = balanced_set(profiles, 2, seed=0)
    assert [p.family for p in chosen] == ["gemm", "gemm", "conv", "conv", "elementwise"]
    assert balanced_set(profiles, 2, seed=0) == chosen


def test_mix_from_a_bench_run(tmp_path):
    from musacoder.bench.runner import BenchConfig, run_bench

    tasks = tmp_path / "pool"
    tasks.mkdir()
    for f in EXAMPLE_TASKS.glob("*.py"):
        shutil.copy(f, tasks / f.name)
    # the model solves relu (elementwise) on both samples, linear_gelu (gemm) on one of two, scale_bias_sum never
    model = write_responses(tmp_path / "model", {("relu", 0, 1): "VERDICT ok 1.0", ("relu", 1, 1): "VERDICT ok 1.0",
                                                 ("linear_gelu", 0, 1): "VERDICT ok 1.0",
                                                 ("linear_gelu", 1, 1): "VERDICT incorrect",
                                                 ("scale_bias_sum", 0, 1): "VERDICT compile_error",
                                                 ("scale_bias_sum", 1, 1): "VERDICT runtime_error"})
    config = BenchConfig(model=f"dir:{model}", suite=f"dir:{tasks}", backend="cpu", samples=2, turns=1)
    run_bench(config, tmp_path / "run", verifier=ScriptedVerifier(), progress=False)
    rates = family_pass_rates(tmp_path / "run", cache=tmp_path / "cache.jsonl", progress=False)
    assert rates == {"elementwise": (2, 2), "gemm": (1, 2), "reduction": (0, 2)}
    doc = build_mix(tasks, tmp_path / "run", tmp_path / "mix", size=50, seed=1, progress=False)
    # raw: elementwise (0+0.1)·0.5 = 0.05, gemm 0.6, reduction 1.1; total 1.75
    shares = {f: info["share"] for f, info in doc["families"].items()}
    assert shares == pytest.approx({"gemm": 0.6 / 1.75, "reduction": 1.1 / 1.75, "elementwise": 0.05 / 1.75})
    assert json.loads((tmp_path / "mix/weights.json").read_text())["families"]["gemm"]["draws"] == \
        doc["families"]["gemm"]["draws"]
    import datasets

    ds = datasets.load_dataset("parquet", data_files=str(tmp_path / "mix/mix/data.parquet"), split="train")
    assert len(ds) == 50 and set(ds["family"]) <= {"gemm", "reduction", "elementwise"}
    assert ds.to_list()[0]["source"] == (tasks / ds[0]["file"]).read_text()
    assert "| reduction |" in (tmp_path / "mix/mix/README.md").read_text()
    assert sorted(p.name for p in (tmp_path / "mix/tasks").iterdir()) == sorted(set(ds["file"]))


def test_mix_errors_name_the_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a bench run directory"):
        family_pass_rates(tmp_path / "nope", cache=tmp_path / "c.jsonl")


def test_cli_diagnose_and_mix(tmp_path):
    import typer
    from typer.testing import CliRunner

    from musacoder.data.cli import register

    app = typer.Typer()
    app.command("noop")(lambda: None)
    register(app)
    res = CliRunner().invoke(app, ["data", "diagnose", str(EXAMPLE_TASKS), "--out", str(tmp_path / "diag"),
                                   "--per-family", "1", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "diag/tasks").iterdir()) == ["linear_gelu.py", "relu.py",
                                                                          "scale_bias_sum.py"]
    assert "gemm 1" in res.output and "bench --suite dir:" in res.output
    res = CliRunner().invoke(app, ["data", "mix", str(EXAMPLE_TASKS), "--bench", str(tmp_path / "none"),
                                   "--out", str(tmp_path / "mix"), "--no-progress"])
    assert res.exit_code == 2 and "not a bench run directory" in res.output
