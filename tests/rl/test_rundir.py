"""The RL run directory: resume only when the recorded settings agree, final/ a complete model folder the next
stage loads (bench's hf: client, another RL run), the stage manifest."""

import json

import pytest
import torch

from musacoder.manifest import read_manifest, resolve_model
from musacoder.rl.config import RLConfig
from musacoder.rl.metrics import read_metrics
from musacoder.rl.rundir import ResumeError, config_differences, start_plan

pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[train]' (or .[dev])")

from musacoder.rl.trainer import Trainer, config_record, train_from_config  # noqa: E402


def toy(tmp_path, out="run", **sections) -> RLConfig:
    data = {
        "model": {"device": "cpu", "tiny": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64}},
        "env": {"kind": "toy"},
        "rollout": {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 3, "chunk_size": 64},
        "grpo": {"group_size": 4, "prompts_per_step": 2, "minibatch_size": 8, "micro_batch_size": 8, "lr": 1e-3},
        "multi_turn": {"single_turn_steps": 1},
        "run": {"steps": 2, "out_dir": str(tmp_path / out), "threads": 1, "save_every": 1},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    return RLConfig.model_validate(data)


# --- which settings may change ---------------------------------------------------------------------------------

def test_config_differences_ignore_free_keys_and_fill_new_keys_from_defaults(tmp_path):
    a = toy(tmp_path).model_dump(mode="json")
    b = toy(tmp_path, run={"steps": 9, "save_every": 3, "eval_every": 2}, env={"max_workers": 7},
            grpo={"micro_batch_size": 1}).model_dump(mode="json")
    assert config_differences(a, b) == {}
    c = toy(tmp_path, grpo={"lr": 5e-3}, model={"name_or_path": str(tmp_path)}).model_dump(mode="json")
    differ = config_differences(a, c)
    assert set(differ) == {"grpo.lr", "model.name_or_path"}  # model.tiny is unused once a model path is set
    assert differ["grpo.lr"] == (1e-3, 5e-3)
    old = json.loads(json.dumps(a))
    del old["env"]["six_step"]  # a record written before the option existed: its default counts
    assert config_differences(old, a, RLConfig().model_dump(mode="json")) == {}


def test_resume_refuses_a_changed_learning_rate_and_names_the_ways_on(tmp_path):
    train_from_config(toy(tmp_path))
    with pytest.raises(ResumeError) as e:
        Trainer(toy(tmp_path, grpo={"lr": 5e-3}, run={"steps": 3}))
    msg = str(e.value)
    assert "grpo.lr: 0.001 there, 0.005 now" in msg
    assert "--fresh" in msg and "--out-dir" in msg and "run.resume=" in msg and "step_000002.pt" in msg


def test_resume_refuses_another_model_before_loading_it(tmp_path):
    train_from_config(toy(tmp_path))
    other = tmp_path / "no_such_model_yet"  # never loaded: the start is refused first
    with pytest.raises(ResumeError, match="model.name_or_path"):
        Trainer(toy(tmp_path, model={"name_or_path": str(other)}))


def test_fresh_start_clears_checkpoints_and_metrics(tmp_path):
    train_from_config(toy(tmp_path))
    cfg = toy(tmp_path, grpo={"lr": 5e-3}, run={"steps": 1, "resume": False})
    rows = train_from_config(cfg)
    assert [r["step"] for r in rows] == [1]
    assert [r["step"] for r in read_metrics(tmp_path / "run")] == [1]
    assert [p.name for p in (tmp_path / "run" / "checkpoints").glob("*.pt")] == ["step_000001.pt"]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["grpo"]["lr"] == 5e-3


def test_forced_resume_applies_the_new_learning_rate(tmp_path):
    train_from_config(toy(tmp_path))
    ckpt = tmp_path / "run" / "checkpoints" / "step_000002.pt"
    trainer = Trainer(toy(tmp_path, grpo={"lr": 5e-3}, run={"steps": 3, "resume": str(ckpt)}))
    try:
        assert trainer.step_idx == 2 and trainer.resume_changed == {"grpo.lr": (1e-3, 5e-3)}
        assert [g["lr"] for g in trainer.optimizer.param_groups] == [5e-3]
    finally:
        trainer.close()


def test_matching_resume_drops_metrics_of_steps_after_the_checkpoint(tmp_path):
    cfg = toy(tmp_path, run={"steps": 3, "save_every": 2})
    train_from_config(cfg)  # checkpoints at 2 and 3
    (tmp_path / "run" / "checkpoints" / "step_000003.pt").unlink()  # as if the run died after step 3's row
    assert start_plan(tmp_path / "run", config_record(cfg), True).resume_from.name == "step_000002.pt"
    trainer = Trainer(cfg)
    trainer.close()
    assert [r["step"] for r in read_metrics(tmp_path / "run")] == [1, 2]


# --- what the run hands on --------------------------------------------------------------------------------------

def test_final_is_a_model_folder_that_bench_and_a_second_rl_run_load(tmp_path):
    first = toy(tmp_path, out="rl1")
    train_from_config(first)
    m = read_manifest(tmp_path / "rl1")
    assert m.stage == "rl" and m.files["model"] == "final" and m.files["metrics"] == "metrics.jsonl"
    assert m.inputs["model"].startswith("tiny") and m.info["steps"] == 2
    final = resolve_model(tmp_path / "rl1")
    assert final == (tmp_path / "rl1" / "final").resolve()
    assert (final / "tokenizer.json").is_file() and (final / "config.json").is_file()

    from musacoder.models import make_client
    from musacoder.models.base import ChatRequest, Sampling

    client = make_client(f"hf:{tmp_path / 'rl1'}", {"device": "cpu"})  # the stage folder, as bench takes it
    request = ChatRequest(id="t", messages=({"role": "user", "content": "a="},), task="toy_a")
    [(_, completion)] = list(client.generate([request], Sampling(temperature=0.0, max_tokens=3)))
    assert isinstance(completion.text, str)

    # a second RL run starts from the first one's folder: same weights, same tokenisation of the prompt
    trained = torch.load(tmp_path / "rl1" / "checkpoints" / "step_000002.pt", weights_only=False)["model"]
    second = toy(tmp_path, out="rl2", model={"name_or_path": str(tmp_path / "rl1")}, run={"steps": 1})
    trainer = Trainer(second)
    try:
        for name, value in trainer.model.state_dict().items():
            torch.testing.assert_close(value, trained[name])
        from musacoder.rl.rollout import render_context
        from musacoder.rl.tokenizer import CharTokenizer
        from musacoder.rl.toy import TOY_CHARSET

        messages = [{"role": "user", "content": "c="}, {"role": "assistant", "content": "cab"},
                    {"role": "user", "content": "|c="}]
        assert render_context(trainer.tokenizer, messages) == render_context(CharTokenizer(TOY_CHARSET), messages)
        rows = trainer.train()
        trainer.save_final()
    finally:
        trainer.close()
    assert len(rows) == 1
    assert read_manifest(tmp_path / "rl2").inputs["model"] == str((tmp_path / "rl1").resolve())


def test_lora_final_is_merged_and_the_adapter_kept(tmp_path):
    pytest.importorskip("peft", reason="peft is not installed: pip install -e '.[train]'")
    from transformers import AutoModelForCausalLM

    from musacoder.rl.trainer import build_policy, build_tokenizer

    cfg = toy(tmp_path, model={"lora": {"r": 4, "alpha": 8}}, grpo={"lr": 5e-2}, run={"steps": 2})
    plain = cfg.model_copy(update={"model": cfg.model.model_copy(update={"lora": None})})
    initial = build_policy(plain, build_tokenizer(plain)).state_dict()  # the same seeded init, no adapters
    trainer = Trainer(cfg)
    try:
        rows = trainer.train()
        trainer.save_final()
        expected = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    finally:
        trainer.close()
    assert sum(r["updates"] for r in rows) > 0
    run = tmp_path / "run"
    assert (run / "adapter" / "adapter_config.json").is_file()
    assert read_manifest(run).files["adapter"] == "adapter"
    loaded = AutoModelForCausalLM.from_pretrained(run / "final").state_dict()
    assert not any("lora" in k for k in loaded) and set(loaded) == set(initial)
    for name, value in loaded.items():
        torch.testing.assert_close(value, expected[name])
    changed = [k for k in loaded if not torch.equal(loaded[k], initial[k])]
    assert changed and all("proj" in k for k in changed)  # the trained adapters, merged into the linear layers


def test_model_location_resolves_stage_folders_only(tmp_path):
    from musacoder.manifest import Manifest, write_manifest
    from musacoder.rl.trainer import model_location

    assert model_location("Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"  # a hub id passes through
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text("{}")
    assert model_location(str(plain)) == str(plain)  # a model folder stays
    stage = tmp_path / "sft"
    (stage / "final").mkdir(parents=True)
    (stage / "final" / "config.json").write_text("{}")
    write_manifest(stage, Manifest(stage="sft", files={"model": "final"}))
    assert model_location(str(stage)) == str((stage / "final").resolve())
    unfinished = tmp_path / "rl"
    write_manifest(unfinished, Manifest(stage="rl", files={"metrics": "metrics.jsonl"}))
    with pytest.raises(ValueError, match="'rl' folder without a model"):
        model_location(str(unfinished))


def test_char_tokenizer_saved_and_loaded_keeps_ids_and_rendering(tmp_path):
    import string

    from transformers import AutoTokenizer

    from musacoder.rl.rollout import render_context
    from musacoder.rl.tokenizer import CharTokenizer

    tok = CharTokenizer(string.printable)
    tok.save_pretrained(tmp_path / "tok")
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    text = "def f(x):\n\treturn x  # é\r\x0b\x0c|<eos>"
    assert loaded.encode(text, add_special_tokens=False) == tok.encode(text)
    assert (loaded.pad_token_id, loaded.eos_token_id, len(loaded)) == (0, 1, len(tok))
    ids = tok.encode("ab c") + [1, 0]
    assert loaded.decode(ids, skip_special_tokens=True) == tok.decode(ids) == "ab c"
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u\n"},
                {"role": "assistant", "content": "a"}, {"role": "user", "content": "f"}]
    assert render_context(loaded, messages) == render_context(tok, messages)
