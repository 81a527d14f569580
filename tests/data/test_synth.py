"""Stage 1: catalogue and graph candidates render to loadable tasks, shape inference holds, the checks reject what
they must, and a run writes a resumable manifest."""

from __future__ import annotations

import json
import random

import pytest

from musacoder.data.catalogue import CATALOGUE, catalogue_task
from musacoder.data.check import CheckLimits, check_task
from musacoder.data.graphs import graph_task
from musacoder.data.records import ManifestRow
from musacoder.data.render import render_task
from musacoder.data.synth import MANIFEST, SynthConfig, candidate, synthesize
from musacoder.tasks import load_module, load_task, size_constants

BASE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expr}


n = 64


def get_inputs():
    return [torch.randn(n, n)]


def get_init_inputs():
    return []
"""


def test_candidates_are_pure_functions_of_seed_and_index():
    cfg = SynthConfig(seed=3)
    assert [render_task(candidate(cfg, i)) for i in range(1, 9)] == [render_task(candidate(cfg, i)) for i in range(1, 9)]
    assert render_task(candidate(cfg, 1)) != render_task(candidate(SynthConfig(seed=4), 1))


def test_every_catalogue_entry_and_variant_renders_a_loadable_task(tmp_path):
    rng = random.Random(0)
    for entry in CATALOGUE:
        for variant in entry.variants:
            dt = variant if variant in ("fp16", "bf16") else "fp32"
            from musacoder.data.catalogue import Sizes

            spec = entry.build(rng, Sizes(rng, variant, 1.0), variant, dt)
            path = tmp_path / f"1_{spec.name}_{variant}.py"
            path.write_text(render_task(spec))
            module = load_module(load_task(path))
            assert callable(module.get_inputs) and isinstance(module.get_init_inputs(), list)
            assert size_constants(path.read_text()), path.name


def test_graph_shape_inference_matches_execution():
    for i in range(25):
        spec = graph_task(random.Random(i))
        assert 2 <= len(spec.ops) <= 6
        result = check_task(render_task(spec), seed=0)
        if result.kept:
            assert result.output_shapes == [spec.out_shape], (spec.ops, render_task(spec))


def test_scale_and_overrides_carry_through():
    spec = graph_task(random.Random(1), scale=2.0)
    small = graph_task(random.Random(1), scale=1.0)
    assert spec.ops == small.ops
    assert spec.constants["batch_size"] >= small.constants["batch_size"]
    odd = catalogue_task(random.Random(7), scale=3.0, families={"activation"})
    assert all(v > 0 for v in odd.constants.values() if isinstance(v, int))


@pytest.mark.parametrize("expr, reason", [
    ("x + torch.rand_like(x)", "nondeterministic"),
    ("torch.log(x - 10)", "non-finite"),
    ("x * 0", "degenerate"),
    ("torch.ones_like(x).sum()", "degenerate"),
    ("x.relu_()", "forward modifies its inputs"),
    ("(x, 1)", "output is tuple"),
])
def test_check_rejects_with_reason(expr, reason):
    result = check_task(BASE.format(expr=expr), seed=0)
    assert not result.kept and result.reason.startswith(reason), result.reason


def test_check_rejects_external_state_before_running():
    result = check_task("import os\n" + BASE.format(expr="x"), seed=0)
    assert not result.kept and result.reason.startswith("external state")


def test_check_bounds_memory_and_time():
    big = BASE.format(expr="x.expand(64, 64).repeat(64, 64)")
    assert check_task(big, 0, CheckLimits(max_footprint_bytes=2**20)).reason.startswith("memory")
    slow = BASE.format(expr="torch.stack([x @ x for _ in range(200)]).sum(0)")
    assert check_task(slow, 0, CheckLimits(max_forward_s=1e-4)).reason.startswith("time")
    assert check_task(BASE.format(expr="torch.tanh(x)"), 0).kept


def test_worker_kills_a_hanging_task_and_recovers():
    from musacoder.data.worker import CheckWorker

    with CheckWorker(CheckLimits(timeout_s=2.0)) as worker:
        assert worker.check(BASE.format(expr="torch.tanh(x)")).kept
        hang = BASE.format(expr="x").replace("        super().__init__()", "        super().__init__()\n        while True:\n            pass")
        assert worker.check(hang).reason.startswith("timeout")
        assert worker.check(BASE.format(expr="torch.sigmoid(x)")).kept


def test_synthesize_writes_manifest_and_resumes(tmp_path):
    cfg = SynthConfig(count=14, seed=5)
    summary = synthesize(cfg, tmp_path, progress=False)
    rows = [ManifestRow.model_validate_json(line) for line in (tmp_path / MANIFEST).read_text().splitlines()]
    assert summary.candidates == len(rows) == 14 and summary.kept == sum(r.kept for r in rows) >= 10
    for r in rows:
        assert (tmp_path / r.file).is_file() == r.kept
        assert r.kept or r.reason
        if r.kept:
            assert r.ops and r.shapes["inputs"] and r.shapes["outputs"]
            load_module(load_task(tmp_path / r.file))
    keys = set(json.loads((tmp_path / MANIFEST).read_text().splitlines()[0]))
    assert {"file", "family", "kept", "reason", "ops", "shapes"} <= keys
    before = (tmp_path / MANIFEST).read_text()
    assert synthesize(cfg, tmp_path, progress=False).candidates == 14
    assert (tmp_path / MANIFEST).read_text() == before  # nothing redone
    synthesize(cfg.model_copy(update={"count": 16}), tmp_path, progress=False)
    assert len((tmp_path / MANIFEST).read_text().splitlines()) == 16
    with pytest.raises(ValueError, match="seed"):
        synthesize(cfg.model_copy(update={"seed": 6}), tmp_path, progress=False)


def test_families_filter():
    cfg = SynthConfig(families=["gemm", "conv"])
    assert {candidate(cfg, i).family for i in range(1, 20)} <= {"gemm", "conv"}
    assert {candidate(SynthConfig(families=["graph"]), i).kind for i in range(1, 10)} == {"graph"}
    with pytest.raises(ValueError, match="unknown families"):
        candidate(SynthConfig(families=["nope"]), 1)


def test_every_block_of_a_real_architecture_is_kept_by_the_stage_1_checks(tmp_path):
    """Stage 1, part c: each block and variant renders a loadable KernelBench-format task that executes, is
    deterministic, finite and not degenerate; its size constants carry through --set as for the other kinds."""
    from musacoder.data.blocks import BLOCKS, VARIANTS, block_task
    from musacoder.data.catalogue import Sizes

    for name, build in sorted(BLOCKS.items()):
        for variant in VARIANTS:
            spec = build(Sizes(random.Random(f"{name}:{variant}"), variant, 1.0))
            assert spec.kind == "block" and spec.family == "block"
            source = render_task(spec)
            path = tmp_path / f"1_{name}_{variant}.py"
            path.write_text(source)
            load_module(load_task(path))
            assert size_constants(source), name
            result = check_task(source, seed=0)
            assert result.kept, (name, variant, result.reason)
    assert block_task(random.Random(0), scale=2.0).constants != block_task(random.Random(0)).constants


def test_blocks_come_from_a_stream_of_their_own():
    """Blocks are a share of the candidates (`block_fraction`), drawn so that every other candidate of a seed stays
    what it was without them; `families=['block']` gives blocks only."""
    with_blocks, without = SynthConfig(seed=2, block_fraction=0.3), SynthConfig(seed=2, block_fraction=0.0)
    kinds = [candidate(with_blocks, i).kind for i in range(40)]
    assert 4 <= kinds.count("block") <= 24 and "block" not in {candidate(without, i).kind for i in range(40)}
    for i, kind in enumerate(kinds):
        if kind != "block":
            assert render_task(candidate(with_blocks, i)) == render_task(candidate(without, i))
    assert {candidate(SynthConfig(families=["block"]), i).kind for i in range(10)} == {"block"}
    assert {candidate(SynthConfig(families=["gemm"]), i).family for i in range(10)} == {"gemm"}
