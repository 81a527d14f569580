"""The whole data pipeline on the CPU from examples/data/tiny_pipeline.toml: stage-1 tasks executed, a decontamination
report, mix weights from a bench run of a `dir:` model, stages 2-3 datasets and an RFT pool, every kernel verified by
MooreEval on the cpu backend. The config's pre-written responses: relu 3 accepted (two structures), linear_gelu one
accepted and one wrong-then-fixed, scale_bias_sum one illegal-then-fixed and one compile error."""

from __future__ import annotations

import json

import pytest
from data_helpers import REPO

from musacoder.data.pipeline import PipelineConfig, load_config, run_pipeline

CONFIG = REPO / "examples" / "data" / "tiny_pipeline.toml"


def test_config_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(CONFIG.read_text().replace("[mix]", "[mix]\nsizes = 3"))
    with pytest.raises(ValueError, match=r"(?s)bad\.toml.*mix\.sizes"):
        load_config(bad)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_config(tmp_path / "missing.toml")


@pytest.mark.slow
def test_tiny_pipeline_end_to_end(tmp_path, monkeypatch):
    import datasets

    from musacoder.data.rft import draw_epoch

    monkeypatch.chdir(REPO)  # the config's paths are relative to the repository root
    cfg = load_config(CONFIG)
    cfg = PipelineConfig.model_validate({**cfg.model_dump(), "out": str(tmp_path / "out")})
    summary = run_pipeline(cfg, progress=False, log=lambda m: None)
    out = tmp_path / "out"

    manifest = [json.loads(x) for x in (out / "tasks" / "manifest.jsonl").read_text().splitlines()]
    assert len(manifest) == 12 and summary["tasks"]["kept"] == sum(r["kept"] for r in manifest) >= 8
    report = json.loads((out / "decontam.json").read_text())
    assert len(report) == summary["tasks"]["kept"]
    assert all({"file", "contaminated", "match", "score"} <= r.keys() for r in report)

    # bench: relu 2/2 accepted, linear_gelu 1/2, scale_bias_sum 0/2 → weights ordered by weakness
    weights = json.loads((out / "mix" / "weights.json").read_text())
    assert {f: (v["passed"], v["samples"]) for f, v in weights["pass_rates"].items()} == \
        {"elementwise": (2, 2), "gemm": (1, 2), "reduction": (0, 2)}
    fam = weights["families"]
    if "elementwise" in fam and "reduction" in fam:
        assert fam["elementwise"]["share"] < fam["reduction"]["share"]
    assert abs(sum(v["share"] for v in fam.values()) - 1) < 1e-9
    mix = datasets.load_dataset("parquet", data_files=str(out / "mix" / "mix" / "data.parquet"), split="train")
    assert len(mix) == 24

    counts = summary["solutions"]
    assert counts["solutions"] == 3 and counts["repair"] == 2 and counts["reviewer"] == 3
    repair = datasets.load_dataset("parquet", data_files=str(out / "solutions" / "repair" / "data.parquet"),
                                   split="train").to_list()
    assert {r["task"] for r in repair} == {"linear_gelu", "scale_bias_sum"}
    assert all(r["messages"][3]["content"].startswith("=== System Feedback for Round 1 ===") for r in repair)
    reviewer = datasets.load_dataset("parquet", data_files=str(out / "solutions" / "reviewer" / "data.parquet"),
                                     split="train").to_list()
    assert sorted(r["status"] for r in reviewer) == ["compile_error", "illegal", "incorrect"]

    rft = datasets.load_dataset("parquet", data_files=str(out / "rft" / "rft" / "data.parquet"), split="train")
    rows = {r["task"]: r for r in rft.to_list()}
    assert set(rows) == {"relu", "linear_gelu"}  # scale_bias_sum's only answer is illegal
    assert rows["relu"]["accepted"] == 3 and rows["relu"]["clusters"] == 2
    assert sorted(m["cluster_size"] for m in rows["relu"]["pool"]) == [1, 2]  # flat loop ×2 (renamed), blocked ×1
    drawn = draw_epoch(rft.to_list(), 0, seed=0)
    assert [d["messages"][-1]["role"] for d in drawn] == ["assistant", "assistant"]
    assert (out / "rft" / "rft" / "README.md").read_text().count("Rows: 2.") == 1

    # the stage folders chain: the pipeline's out, solutions/ and rft/ name their rows for `train sft|rft`
    from musacoder.manifest import read_manifest
    from musacoder.sft.dataset import detect_kind, load_rows

    top = read_manifest(out)
    assert top.files["sft"] == "solutions/sft.jsonl" and top.files["rft"] == "rft/rft.jsonl"
    chat, origins = load_rows([str(out)])
    assert len(chat) == sum(counts.values()) and detect_kind(chat, "auto", origins) == "sft"
    pools, origins = load_rows([str(out / "rft")])
    assert len(pools) == 2 and detect_kind(pools, "auto", origins) == "rft"
