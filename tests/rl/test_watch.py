"""Watching a run: the metric names every row carries, held-out evaluation (eval/ keys), the optional
TensorBoard and W&B sinks (an error when enabled but missing), and the prompts RL shares with the SFT data."""

import string
import sys
import types

import pytest

from musacoder.records import Task, Verdict
from musacoder.rl import KernelEnv
from musacoder.rl.config import RLConfig
from musacoder.rl.metrics import MetricsLogger, SinkUnavailable, read_metrics

pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[train]' (or .[dev])")

from musacoder.rl.tokenizer import CharTokenizer  # noqa: E402
from musacoder.rl.trainer import Trainer, train_from_config  # noqa: E402

# the names a report plots; docs/rl.md lists them
PLOTTED = ("reward_mean", "pass_first", "mirrorpop_keep_rate", "retry_buffer", "kl")


def toy(tmp_path, **run) -> RLConfig:
    return RLConfig.model_validate({
        "model": {"device": "cpu", "tiny": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64}},
        "env": {"kind": "toy"},
        "rollout": {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 3, "chunk_size": 64},
        "grpo": {"group_size": 4, "prompts_per_step": 2, "minibatch_size": 8, "micro_batch_size": 8, "lr": 1e-3},
        "multi_turn": {"single_turn_steps": 1},
        "run": {"steps": 3, "out_dir": str(tmp_path / "run"), "threads": 1, **run},
    })


def test_rows_carry_the_plotted_metrics_and_eval_keys(tmp_path):
    rows = train_from_config(toy(tmp_path, eval_every=2, eval_samples=2))
    logged = read_metrics(tmp_path / "run")
    assert [r["step"] for r in logged] == [0, 1, 2, 3]  # step 0: the evaluation before training
    assert set(logged[0]) == {"step", "eval/pass_at_1", "eval/speedup_mean", "eval/speedup_geomean", "eval/score_mean",
                              "eval/samples", "eval/infra_errors", "eval/time_s"}
    # nothing timed (toy outcomes carry no speedup): null in the JSON, as `train sft` writes it, never NaN
    assert logged[0]["eval/speedup_mean"] is None and logged[0]["eval/speedup_geomean"] is None
    first_line = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0]
    assert '"eval/speedup_mean": null' in first_line and '"eval/speedup_geomean": null' in first_line
    assert logged[0]["eval/samples"] == 8 * 2  # the 8 toy tasks, 2 samples each
    assert "eval/pass_at_1" in logged[2] and "eval/pass_at_1" in logged[3] and "eval/pass_at_1" not in logged[1]
    for row in logged[1:]:
        for key in PLOTTED:
            assert key in row, key
        assert row["mem_logits_chunk_bytes"] >= 0 and row["mem_rss_peak_bytes"] > 0
    for row in logged[1:]:
        checked = row["mirrorpop_checked"]
        if checked:
            assert row["mirrorpop_keep_rate"] == pytest.approx(1 - row["mirrorpop_popped"] / checked)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]


def test_greedy_evaluation_is_deterministic(tmp_path):
    trainer = Trainer(toy(tmp_path, eval_every=1, eval_samples=3))
    try:
        a, b = trainer.evaluate(), trainer.evaluate()
    finally:
        trainer.close()
    assert a["eval/pass_at_1"] == b["eval/pass_at_1"] and a["eval/score_mean"] == b["eval/score_mean"]
    assert a["eval/speedup_mean"] is None and a["eval/speedup_geomean"] is None  # toy outcomes carry no speedup


class TimedVerifier:
    """Passes 'PASS' answers with a speedup of 2.0 ('PASS8': 8.0); everything else is incorrect."""

    def __call__(self, task, candidate, backend=None, overrides=None, config=None) -> Verdict:
        if "PASS" in candidate:
            return Verdict(status="ok", compiled=True, legal=True, correct=True, pass_fraction=1.0,
                           speedup=8.0 if "PASS8" in candidate else 2.0, reward=1.5, feedback="ok")
        return Verdict(status="incorrect", compiled=True, legal=True, reward=-1.0, feedback="0/5 trials passed")


class ScriptedGenerator:
    def __init__(self, tokenizer, answers):
        self.tokenizer, self.answers = tokenizer, list(answers)

    def generate(self, contexts):
        return [(self.tokenizer.encode(self.answers.pop(0)), [0.0] * 4) for _ in contexts]


def test_kernel_evaluation_reports_pass_at_1_and_the_speedup_means(tmp_path, relu_task, monkeypatch):
    held_out = Task(name="2_Neg", source=relu_task.source.replace("torch.relu(x)", "-x"))
    cfg = RLConfig.model_validate({
        "model": {"device": "cpu", "tiny": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64,
                                            "max_positions": 8192}},
        "env": {"kind": "kernel", "backend": "cpu", "metadata": False, "six_step": False},
        "run": {"steps": 1, "out_dir": str(tmp_path / "run"), "threads": 1, "eval_every": 1, "eval_samples": 2},
    })
    tok = CharTokenizer(string.printable)
    trainer = Trainer(cfg, tokenizer=tok, tasks=[relu_task], eval_tasks=[relu_task, held_out],
                      verifier=TimedVerifier())
    import musacoder.rl.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "HFGenerator", lambda *a, **k: ScriptedGenerator(tok, ["PASS", "no", "PASS8",
                                                                                                "no"]))
    try:
        ev = trainer.evaluate()
    finally:
        trainer.close()
    assert ev["eval/pass_at_1"] == 0.5 and ev["eval/samples"] == 4
    assert ev["eval/speedup_mean"] == pytest.approx(5.0)  # (2 + 8) / 2
    assert ev["eval/speedup_geomean"] == pytest.approx(4.0)  # sqrt(2 * 8), as `train sft` computes it


def test_eval_every_without_held_out_kernel_tasks_is_an_error(tmp_path, relu_task):
    cfg = RLConfig.model_validate({"model": {"device": "cpu"}, "env": {"kind": "kernel"},
                                   "run": {"out_dir": str(tmp_path / "run"), "eval_every": 5}})
    with pytest.raises(ValueError, match="env.eval_tasks"):
        Trainer(cfg, tokenizer=CharTokenizer(), tasks=[relu_task])


# --- sinks ------------------------------------------------------------------------------------------------------

def test_enabled_sinks_without_their_package_are_errors(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(SinkUnavailable, match=r"pip install -e '\.\[wandb\]'"):
        MetricsLogger(tmp_path, wandb=True)
    with pytest.raises(SinkUnavailable, match=r"pip install -e '\.\[tensorboard\]'"):
        MetricsLogger(tmp_path, tensorboard=True)
    assert not (tmp_path / "metrics.jsonl").exists()  # refused before anything was written
    with pytest.raises(SinkUnavailable):
        train_from_config(toy(tmp_path, tensorboard=True))
    assert not (tmp_path / "run").exists()  # refused before the run folder was touched


def test_wandb_and_tensorboard_receive_every_numeric_metric(tmp_path, monkeypatch):
    calls = {"init": [], "log": [], "scalars": [], "finish": 0}

    class Run:
        def log(self, data, step):
            calls["log"].append((step, data))

        def finish(self):
            calls["finish"] += 1

    fake_wandb = types.SimpleNamespace(init=lambda **kw: calls["init"].append(kw) or Run(),
                                       util=types.SimpleNamespace(generate_id=lambda: "abc123"))

    class Writer:
        def __init__(self, log_dir):
            self.log_dir = log_dir

        def add_scalar(self, key, value, step):
            calls["scalars"].append((key, value, step))

        def close(self):
            pass

    monkeypatch.setitem(sys.modules, "wandb", fake_wandb)
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", types.SimpleNamespace(SummaryWriter=Writer))
    logger = MetricsLogger(tmp_path, tensorboard=True, wandb=True, wandb_mode="offline", config={"a": 1})
    logger.log(1, {"stage": "single_turn", "reward_mean": 0.5, "kl": float("nan"), "eval/pass_at_1": 0.25})
    logger.close()
    MetricsLogger(tmp_path, wandb=True).close()  # a resumed run logs into the same W&B run
    assert calls["init"][0]["mode"] == "offline" and calls["init"][0]["id"] == "abc123"
    assert calls["init"][1]["id"] == "abc123" and calls["init"][1]["resume"] == "allow"
    assert calls["log"] == [(1, {"reward_mean": 0.5, "eval/pass_at_1": 0.25})]
    assert calls["scalars"] == [("reward_mean", 0.5, 1), ("eval/pass_at_1", 0.25, 1)]
    assert read_metrics(tmp_path)[0]["stage"] == "single_turn" and calls["finish"] == 2


# --- prompts --------------------------------------------------------------------------------------------------

def test_kernel_prompts_offer_the_sft_options(relu_task, fake_verifier):
    from musacoder.data.solutions import stage2_messages
    from musacoder.prompts import SIX_STEP
    from musacoder.prompts.metadata import task_metadata

    cache: dict = {}
    env = KernelEnv(fake_verifier, backend="cpu", metadata=True, six_step=True, prompt_cache=cache)
    env.reset(relu_task)
    assert env.messages == stage2_messages(relu_task.source, "cpu", task_metadata(relu_task), True)
    assert SIX_STEP in env.messages[-1]["content"] and "shape (64,)" in env.messages[-1]["content"]
    assert len(cache) == 1
    again = KernelEnv(fake_verifier, backend="cpu", metadata=True, six_step=True, prompt_cache=cache)
    again.reset(relu_task)
    assert again.messages == env.messages and len(cache) == 1
    plain = KernelEnv(fake_verifier, backend="cpu")
    plain.reset(relu_task)
    assert SIX_STEP not in plain.messages[-1]["content"] and "shape (64,)" not in plain.messages[-1]["content"]
    shot = KernelEnv(fake_verifier, backend="cpu", few_shot=True, six_step=True)
    shot.reset(relu_task)
    assert "Example answer:" in shot.messages[-1]["content"] and shot.messages[-1]["content"].endswith(SIX_STEP)


def test_trainer_builds_kernel_envs_with_the_configured_prompt_options(tmp_path, relu_task, fake_verifier):
    cfg = RLConfig.model_validate({"model": {"device": "cpu"}, "env": {"kind": "kernel", "few_shot": True},
                                   "run": {"out_dir": str(tmp_path / "run")}})
    trainer = Trainer(cfg, tokenizer=CharTokenizer(), tasks=[relu_task], verifier=fake_verifier)
    try:
        env = trainer.env_factory(1)
    finally:
        trainer.close()
    assert (env.metadata, env.six_step, env.few_shot) == (True, True, True)  # metadata and six-step: the defaults
