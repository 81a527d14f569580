"""Stages 2 and 3 from a scripted generation run: metadata + six-step prompts, solutions only when accepted, repair
trajectories with RL's feedback messages, optimisation rewrites, reviewer rows labelled by the verdict; Parquet with
cards that the SFT loader reads; a rerun resumes without regenerating."""

from __future__ import annotations

import shutil

import pytest
from data_helpers import EXAMPLE_TASKS, ScriptedVerifier, write_responses

from musacoder.data.solutions import (Turn, build_datasets, generate, optimise_rows, repair_rows,
                                      review_answer, reviewer_rows, solution_rows)
from musacoder.prompts import SIX_STEP, conversation

PROMPT = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]


def _t(sample, turn, status, speedup=None, response=None):
    return Turn(task="relu", sample=sample, turn=turn, response=response or f"<think>r{sample}.{turn}</think>code "
                f"{sample}.{turn}", status=status, feedback=f"feedback {sample}.{turn}", speedup=speedup)


def test_solution_rows_keep_accepted_first_turns_only():
    rows = solution_rows(PROMPT, [_t(0, 1, "ok", 1.2), _t(1, 1, "incorrect"), _t(1, 2, "ok", 2.0)])
    assert [(r["sample"], r["turn"]) for r in rows] == [(0, 1)]
    assert rows[0]["messages"][-1] == {"role": "assistant", "content": "<think>r0.1</think>code 0.1"}
    assert rows[0]["loss_turn"] == 2 and rows[0]["kind"] == "solution"


def test_repair_rows_use_rl_conversation_and_stop_at_infra_errors():
    samples = {0: [_t(0, 1, "compile_error"), _t(0, 2, "incorrect"), _t(0, 3, "ok", 1.1)],
               1: [_t(1, 1, "ok", 1.0)],  # passed at once: no repair
               2: [_t(2, 1, "infra_error"), _t(2, 2, "ok")],  # an infra error says nothing about the kernel
               3: [_t(3, 1, "incorrect")]}  # never fixed
    rows = repair_rows(PROMPT, samples)
    assert len(rows) == 1
    msgs = rows[0]["messages"]
    expected = conversation(PROMPT, ["<think>r0.1</think>code 0.1", "<think>r0.2</think>code 0.2"],
                            [("feedback 0.1", False), ("feedback 0.2", False)])
    assert msgs[:-1] == expected
    assert msgs[2]["content"] == "code 0.1"  # earlier thinking stripped, as RL does
    assert msgs[3]["content"].startswith("=== System Feedback for Round 1 ===") and "feedback 0.1" in msgs[3]["content"]
    assert msgs[-1]["content"] == "<think>r0.3</think>code 0.3" and rows[0]["loss_turn"] == 6
    assert rows[0]["turn"] == 3 and rows[0]["status"] == "ok"


def test_optimise_rows_pair_slower_with_fastest():
    turns = [_t(0, 1, "ok", 1.0), _t(1, 1, "ok", 1.05), _t(2, 1, "ok", 2.0), _t(3, 1, "ok", None),
             _t(4, 1, "incorrect")]
    rows = optimise_rows(PROMPT, turns, min_gain=0.5, max_pairs=5)
    # fastest 2.0 vs 1.0 and 1.05 (both ≥ 1.5× slower); the untimed and the rejected are left out
    assert [r["messages"][2]["content"] for r in rows] == ["code 0.1", "code 1.1"]
    assert all(r["messages"][-1]["content"].endswith("code 2.1") for r in rows)
    assert rows[0]["messages"][3]["content"].startswith("=== System Feedback for Round 1 ===")
    assert len(optimise_rows(PROMPT, turns, min_gain=0.5, max_pairs=1)) == 1
    assert optimise_rows(PROMPT, turns, min_gain=1.5) == []  # 2.0 < 2.5 × 1.0


def test_reviewer_rows_are_labelled_by_the_verdict():
    code = "```python\nclass ModelNew:\n    pass  # buggy\n```"
    turns = [_t(0, 1, "incorrect", response=code), _t(1, 1, "ok", 1.0), _t(2, 1, "extract_error"),
             _t(3, 1, "infra_error")]
    rows = reviewer_rows("class Model: ...", turns)
    assert [r["status"] for r in rows] == ["incorrect"]
    user, answer = rows[0]["messages"]
    assert "class Model: ..." in user["content"] and "pass  # buggy" in user["content"]
    assert answer["content"].startswith("Verdict: incorrect\n\nfeedback 0.1")
    assert review_answer("incorrect", "Wrong.\nNext: fix it") == "Verdict: incorrect\n\nWrong."


def _script(tmp_path):
    ok = "```python\nclass ModelNew: pass\n```\nVERDICT ok {}"
    return write_responses(tmp_path / "model", {
        ("relu", 0, 1): ok.format(1.0),
        ("relu", 1, 1): "```python\nclass ModelNew: bad\n```\nVERDICT incorrect",
        ("relu", 1, 2): ok.format(1.5),
        ("relu", 0, 2): ok.format(2.0),  # keep optimising after a pass: a faster rewrite
        ("scale_bias_sum", 0, 1): "VERDICT compile_error",
        ("scale_bias_sum", 1, 1): "VERDICT compile_error",
    })


def test_generate_and_build_datasets(tmp_path):
    import datasets

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("relu.py", "scale_bias_sum.py"):
        shutil.copy(EXAMPLE_TASKS / name, tasks / name)
    model = _script(tmp_path)
    verifier = ScriptedVerifier()
    kw = dict(model=f"dir:{model}", backend="cpu", samples=2, turns=2, keep_optimizing=True, progress=False)
    generate(tasks, tmp_path / "out/run", verifier=verifier, **kw)
    assert len(verifier.jobs) == 6  # relu: 2 samples × 2 turns; scale_bias_sum: turn 2 has no file
    prompt = (tmp_path / "out/run/prompts/relu.json").read_text()
    assert "Shapes, strides and dtypes" in prompt and "stride (4096, 1)" in prompt
    assert "1. Semantic decomposition" in prompt and SIX_STEP.splitlines()[-1] in prompt
    counts = build_datasets(tmp_path / "out/run", tmp_path / "out")
    assert counts == {"solutions": 1, "repair": 1, "optimise": 2, "reviewer": 3}
    ds = datasets.load_dataset("parquet", data_files=str(tmp_path / "out/repair/data.parquet"), split="train")
    row = ds[0]
    assert row["task"] == "relu" and row["loss_turn"] == len(row["messages"]) - 1 == 4
    assert row["messages"][3]["content"].startswith("=== System Feedback for Round 1 ===")
    card = (tmp_path / "out/reviewer/README.md").read_text()
    assert "Rows: 3." in card and "| `loss_turn` |" in card and "| compile_error | 2 |" in card
    # the SFT trainer's loader reads these folders as they are
    from musacoder.sft.dataset import detect_kind, load_rows

    rows, _ = load_rows([str(tmp_path / "out" / n) for n in ("solutions", "repair", "optimise", "reviewer")])
    assert len(rows) == 7 and detect_kind(rows) == "sft"
    # ... and the stage folder itself, through its manifest (not run/'s JSONL files, which are not chat rows)
    from musacoder.manifest import read_manifest

    manifest = read_manifest(tmp_path / "out")
    assert manifest.stage == "data" and manifest.files["sft"] == "sft.jsonl" and manifest.files["run"] == "run"
    assert manifest.info["rows"] == counts
    rows, origins = load_rows([str(tmp_path / "out")])
    assert len(rows) == 7 and detect_kind(rows, "auto", origins) == "sft"
    assert sorted(r["kind"] for r in rows) == ["optimise"] * 2 + ["repair", "reviewer", "reviewer", "reviewer",
                                                                  "solution"]
    # a rerun resumes: nothing regenerated or re-verified
    again = ScriptedVerifier()
    generate(tasks, tmp_path / "out/run", verifier=again, **kw)
    assert again.jobs == []


def test_generate_refuses_other_settings_on_resume(tmp_path):
    from musacoder.bench.runner import ResumeError

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    shutil.copy(EXAMPLE_TASKS / "relu.py", tasks / "relu.py")
    model = _script(tmp_path)
    generate(tasks, tmp_path / "run", model=f"dir:{model}", backend="cpu", samples=1, turns=1, keep_optimizing=False,
             verifier=ScriptedVerifier(), progress=False)
    with pytest.raises(ResumeError, match="temperature"):
        generate(tasks, tmp_path / "run", model=f"dir:{model}", backend="cpu", samples=1, turns=1,
                 keep_optimizing=False, temperature=0.1, verifier=ScriptedVerifier(), progress=False)
    with pytest.raises(ResumeError, match="six_step"):  # prompts are the data stage's, checked before the runner's
        generate(tasks, tmp_path / "run", model=f"dir:{model}", backend="cpu", samples=1, turns=1,
                 keep_optimizing=False, six_step=False, verifier=ScriptedVerifier(), progress=False)


def test_rft_stage_folder_names_its_pool_rows(tmp_path):
    from musacoder.data.rft import build_rft
    from musacoder.manifest import read_manifest
    from musacoder.sft.dataset import detect_kind, load_rows

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("relu.py", "scale_bias_sum.py"):
        shutil.copy(EXAMPLE_TASKS / name, tasks / name)
    generate(tasks, tmp_path / "out/run", model=f"dir:{_script(tmp_path)}", backend="cpu", samples=2, turns=1,
             keep_optimizing=False, verifier=ScriptedVerifier(), progress=False)
    counts = build_rft(tmp_path / "out/run", tmp_path / "out", cap=4, threshold=0.7, inputs={"tasks": str(tasks)})
    assert counts["tasks_with_pool"] == 1  # relu: sample 0 accepted at turn 1; scale_bias_sum: none
    manifest = read_manifest(tmp_path / "out")
    assert manifest.files == {"sft": "rft.jsonl", "rft": "rft/data.parquet", "run": "run"}
    assert manifest.inputs["tasks"] == str(tasks)
    rows, origins = load_rows([str(tmp_path / "out")])
    assert len(rows) == 1 and detect_kind(rows, "auto", origins) == "rft" and rows[0]["task"] == "relu"
