"""The whole loop on the CPU with the real MooreEval (`musacoder.judge.batch.verify_many`).

One correct C++ ReLU candidate (built once, then served from the default build cache) plus garbage responses
(fast extract errors), from a `dir:` model and from a tiny local transformers model.
"""

import json
from pathlib import Path

import pytest
from bench_helpers import FIXTURES, write_responses

from musacoder.bench.runner import BenchConfig, run_bench

ROOT = Path(__file__).resolve().parents[2]
FAST_VERIFY = {"trials": 2, "repeats": 5, "max_repeats": 10, "time_budget_s": 1.0}


def _relu_task_and_candidate():
    """The lead's example task and candidate when present (shares their build cache), else our fixtures."""
    task, cand = ROOT / "examples/tasks/relu.py", ROOT / "examples/candidates/relu_cpu.py"
    if task.is_file() and cand.is_file():
        return task, f"```python\n{cand.read_text()}```\n"
    return FIXTURES / "tasks/1_relu_tiny.py", (FIXTURES / "relu_cpu_response.md").read_text()


@pytest.mark.slow
def test_end_to_end_cpu_dir_model(tmp_path):
    pytest.importorskip("musacoder.judge.batch", reason="the end-to-end run needs MooreEval's batch verifier (musacoder.judge.batch)")
    task_path, good = _relu_task_and_candidate()
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / task_path.name).write_text(task_path.read_text())
    name = task_path.stem
    write_responses(tmp_path / "resp", {name: {"0.txt": good, "1.txt": "I cannot do that.",
                                               "1.turn2.txt": "<think>retry</think>\nstill no code"}})
    cfg = BenchConfig(model=f"dir:{tmp_path / 'resp'}", suite=f"dir:{suite}", backend="cpu", samples=2, turns=3,
                      verify=FAST_VERIFY)
    summary = run_bench(cfg, tmp_path / "run", progress=False)
    verdicts = [json.loads(x) for x in (tmp_path / "run/verdicts.jsonl").read_text().splitlines()]
    by_key = {(v["sample"], v["turn"]): v["verdict"] for v in verdicts}
    assert sorted(by_key) == [(0, 1), (1, 1), (1, 2)], by_key
    assert by_key[(0, 1)]["status"] == "ok", by_key[(0, 1)]["feedback"]
    assert by_key[(0, 1)]["speedup_vs_eager"] is not None
    assert by_key[(1, 1)]["status"] == "extract_error" and by_key[(1, 2)]["status"] == "extract_error"
    overall = summary["overall"]
    assert overall["pass_at_k"] == 1.0 and overall["avg_at_k"] == 0.5
    assert overall["faster_rate_compile"] is None  # compile baseline is opt-in on the cpu backend
    page = (tmp_path / "run/report.html").read_text()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert page.count('src="data:image/png;base64,') == 3


@pytest.mark.slow
def test_end_to_end_cpu_tiny_hf_model(tmp_path, monkeypatch):
    pytest.importorskip("musacoder.judge.batch", reason="the end-to-end run needs MooreEval's batch verifier (musacoder.judge.batch)")
    from test_bench_models import make_tiny_hf_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = make_tiny_hf_model(tmp_path / "tiny")
    cfg = BenchConfig(model=f"hf:{model}", model_args={"device": "cpu", "batch_size": 2},
                      suite=f"dir:{FIXTURES / 'tasks'}", tasks=["1_*"], backend="cpu", samples=2, turns=2,
                      max_tokens=16, verify=FAST_VERIFY)
    summary = run_bench(cfg, tmp_path / "run", progress=False)
    verdicts = [json.loads(x) for x in (tmp_path / "run/verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == 4  # random weights: no code, so both samples use both turns
    assert all(v["verdict"]["status"] == "extract_error" for v in verdicts)
    assert summary["overall"]["pass_at_k"] == 0.0
    assert (tmp_path / "run/responses/1_relu_tiny/1.turn2.txt").is_file()
