"""Held-out evaluation during SFT: the eval/ metrics from hand-computed verdicts, and a training run that evaluates
the model in training before its first step, every `eval.every` steps and after its last, writing `eval/` rows to
metrics.jsonl and one bench-format run directory per evaluation."""

import json
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="trl is not installed: pip install -e '.[train]' (or .[dev])")

from musacoder.data.runs import Turn  # noqa: E402
from musacoder.feedback import render_feedback  # noqa: E402
from musacoder.records import Verdict  # noqa: E402
from musacoder.sft.config import SFTConfig  # noqa: E402
from musacoder.sft.evaluate import eval_metrics  # noqa: E402
from musacoder.sft.trainer import train_from_config  # noqa: E402

EXAMPLE_TASKS = Path(__file__).resolve().parents[2] / "examples" / "tasks"
TINY = {"tiny": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64, "max_positions": 8192},
        "gradient_checkpointing": False}


def _t(task, sample, status, speedup=None, turn=1):
    return Turn(task=task, sample=sample, turn=turn, response="r", status=status, feedback="", speedup=speedup)


def test_eval_metrics_by_hand():
    row = eval_metrics({
        "relu": [_t("relu", 0, "ok", 2.0), _t("relu", 1, "ok", 0.5)],  # c/n = 1
        "gelu": [_t("gelu", 0, "incorrect"), _t("gelu", 1, "ok", None)],  # 1/2, the pass untimed
        "sum": [_t("sum", 0, "compile_error"), _t("sum", 1, "ok", 8.0, turn=2)],  # a later turn does not count
    })
    # the names `train rl` logs too (tests/rl/test_watch.py)
    assert set(row) == {"eval/pass_at_1", "eval/speedup_mean", "eval/speedup_geomean", "eval/tasks", "eval/samples"}
    assert row["eval/pass_at_1"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert row["eval/speedup_geomean"] == pytest.approx(1.0)  # sqrt(2.0 * 0.5)
    assert row["eval/speedup_mean"] == pytest.approx(1.25)
    assert row["eval/tasks"] == 3 and row["eval/samples"] == 5
    # nothing timed: None (null in metrics.jsonl), as in `train rl`, never NaN
    none = eval_metrics({"relu": [_t("relu", 0, "incorrect")]})
    assert none["eval/pass_at_1"] == 0 and none["eval/speedup_geomean"] is None and none["eval/speedup_mean"] is None
    untimed = eval_metrics({"relu": [_t("relu", 0, "ok", None)]})
    assert untimed["eval/pass_at_1"] == 1 and untimed["eval/speedup_mean"] is None
    assert json.loads(json.dumps(untimed))["eval/speedup_geomean"] is None


class ReluPasses:
    """Verifier stand-in: every answer to relu passes at 2x, every other answer is incorrect."""

    def __init__(self):
        self.jobs = []

    def __call__(self, jobs, *, workers=1, config=None):
        for job in jobs:
            self.jobs.append(job)
            ok = job.task.name == "relu"
            v = Verdict(status="ok" if ok else "incorrect", task=job.task.key, correct=ok, legal=ok,
                        pass_fraction=1.0 if ok else 0.0, speedup=2.0 if ok else None,
                        speedup_vs_eager=2.0 if ok else None, runtime_ms=0.5 if ok else None,
                        ref_runtime_ms=1.0 if ok else None, error=None if ok else "wrong values")
            v.feedback = render_feedback(v)
            yield job, v


def test_sft_run_evaluates_held_out_tasks_into_metrics(tmp_path):
    rows = tmp_path / "chat.jsonl"
    rows.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"echo {i}"},
                                                     {"role": "assistant", "content": str(i)}]}) + "\n"
                            for i in range(8)))
    cfg = SFTConfig.model_validate({
        "model": TINY, "data": {"train": [str(rows)], "max_seq_len": 64},
        "train": {"lr": 1e-3, "epochs": 2, "batch_size": 4},
        "run": {"out_dir": str(tmp_path / "run"), "logging_steps": 1, "threads": 1},
        "eval": {"tasks": str(EXAMPLE_TASKS), "select": ["relu", "scale_bias_sum"], "every": 2, "samples": 2,
                 "max_new_tokens": 4, "backend": "cpu"}})
    verifier = ReluPasses()
    train_from_config(cfg, eval_verifier=verifier)

    logged = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in logged if "eval/pass_at_1" in r]
    assert [r["step"] for r in evals] == [0, 2, 4]  # before training, every 2 of the 4 steps; the last only once
    assert all(r["eval/pass_at_1"] == 0.5 and r["eval/speedup_geomean"] == pytest.approx(2.0)
               and r["eval/speedup_mean"] == pytest.approx(2.0) for r in evals)
    assert all(r["eval/tasks"] == 2 and r["eval/samples"] == 4 for r in evals)
    assert len(verifier.jobs) == 3 * 4
    prompt = json.loads((tmp_path / "run/eval/step-2/prompts/relu.json").read_text())
    assert "1. Semantic decomposition" in prompt[-1]["content"]  # the data stage's prompt, what SFT data holds
    assert (tmp_path / "run/final/config.json").exists()

    # resuming the finished run evaluates nothing again (the last step's evaluation is on disk)
    again = ReluPasses()
    train_from_config(cfg, eval_verifier=again)
    logged = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "eval/pass_at_1" in r] == [0, 2, 4] and again.jobs == []


def test_eval_with_real_verification_on_the_cpu(tmp_path):
    """The tiny model's answers go through MooreEval itself (they are not code: extract_error, no build)."""
    from musacoder.sft.config import SFTEvalConfig
    from musacoder.sft.evaluate import evaluate
    from musacoder.sft.tokenizer import chat_byte_tokenizer
    from musacoder.sft.trainer import build_model

    cfg = SFTConfig.model_validate({"model": TINY})
    tok = chat_byte_tokenizer()
    model = build_model(cfg, tok)
    model.train()
    row = evaluate(model, tok, SFTEvalConfig(tasks=str(EXAMPLE_TASKS), select=["relu"], max_new_tokens=4,
                                             backend="cpu"), tmp_path / "eval")
    assert row["eval/pass_at_1"] == 0 and row["eval/tasks"] == 1 and row["eval/samples"] == 1
    assert row["eval/speedup_mean"] is None and row["eval/speedup_geomean"] is None
    verdicts = [json.loads(x) for x in (tmp_path / "eval" / "verdicts.jsonl").read_text().splitlines()]
    assert [v["verdict"]["status"] for v in verdicts] == ["extract_error"]
    assert model.training and tok.padding_side == "right"  # as they were: training goes on after an evaluation
