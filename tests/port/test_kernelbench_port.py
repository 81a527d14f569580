"""Porting a tree and a candidate, through the CLI."""

import json
from pathlib import Path

from typer.testing import CliRunner

from musacoder.cli import app

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "benchmarks" / "candidates" / "cuda" / "level1" / "19_ReLU.py"


def _tree(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    (kb / "level1").mkdir(parents=True)
    (kb / "level2").mkdir()
    (kb / "level1" / "1_A.py").write_text("import torch\ndef get_inputs():\n    return [torch.randn(2).cuda()]\n")
    (kb / "level1" / "2_B.py").write_text("import torch\ndef get_inputs():\n    return [torch.randn(2)]\n")
    (kb / "level2" / "3_C.py").write_text("import torch\ntorch.backends.cudnn.benchmark = True\n")
    return kb


def test_port_kernelbench_writes_the_tree_and_reports(tmp_path):
    kb, out = _tree(tmp_path), tmp_path / "out"
    r = CliRunner().invoke(app, ["port", "kernelbench", "--kernelbench-dir", str(kb), "--to", "musa", "--out", str(out)])
    assert r.exit_code == 1, r.output  # 3_C has an unmapped name
    assert "ported 2/3" in r.output and "level2/3_C.py" in r.output
    assert ".musa()" in (out / "level1" / "1_A.py").read_text()
    assert (out / "level1" / "2_B.py").read_text() == (kb / "level1" / "2_B.py").read_text()
    report = json.loads((out / "port_report.json").read_text())
    assert report["files"] == 3 and report["ported"] == 2 and report["changed"] == 1
    assert report["not_ported"] == {"level2/3_C.py": ["torch.backends.cudnn.benchmark"]}


def test_port_candidate_prints_the_port():
    r = CliRunner().invoke(app, ["port", "candidate", str(RELU), "--to", "musa"])
    assert r.exit_code == 0, r.output
    assert "musa_sources=cuda_src" in r.stdout and "c10::musa::getCurrentMUSAStream()" in r.stdout


def test_port_rejects_other_targets(tmp_path):
    r = CliRunner().invoke(app, ["port", "candidate", str(RELU), "--to", "hip"])
    assert r.exit_code == 2
    r = CliRunner().invoke(app, ["port", "kernelbench", "--kernelbench-dir", str(tmp_path), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
