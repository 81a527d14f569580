"""SFT resume never surprises: the latest checkpoint is resumed only when the run directory's recorded config agrees
on the settings a checkpoint is a product of (every key but `FREE_KEYS`), or when a checkpoint is named; otherwise an error
names the keys that differ and the ways on. A fresh start removes the earlier run's checkpoints."""

import json

import pytest

pytest.importorskip("trl", reason="trl is not installed: pip install -e '.[train]' (or .[dev])")

from musacoder.rl.rundir import ResumeError  # noqa: E402
from musacoder.sft.config import FREE_KEYS, SFTConfig, resume_mismatch  # noqa: E402
from musacoder.sft.trainer import train_from_config  # noqa: E402

TINY = {"tiny": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64}, "gradient_checkpointing": False}


def rows_file(tmp_path, name="chat.jsonl", n=8):
    path = tmp_path / name
    path.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"echo {i}"},
                                                     {"role": "assistant", "content": str(i)}]}) + "\n"
                            for i in range(n)))
    return str(path)


def config(tmp_path, **changes) -> SFTConfig:
    cfg = {"model": TINY, "data": {"train": [rows_file(tmp_path)], "max_seq_len": 64},
           "train": {"lr": 1e-3, "epochs": 1, "batch_size": 8},
           "run": {"out_dir": str(tmp_path / "run"), "logging_steps": 1, "threads": 1}}
    for key, value in changes.items():
        section, leaf = key.split("__")
        cfg[section] = {**cfg[section], leaf: value}
    return SFTConfig.model_validate(cfg)


def test_resume_mismatch_names_each_differing_key(tmp_path, monkeypatch):
    a = config(tmp_path).model_dump(mode="json")
    b = config(tmp_path, train__lr=2e-3, model__lora={"r": 4}, train__epochs=3, run__logging_steps=5)
    differ = resume_mismatch(a, b.model_dump(mode="json"))
    assert set(differ) == {"train.lr", "model.lora"}  # epochs and logging may change on a resume
    assert differ["train.lr"] == (1e-3, 2e-3)
    assert not {"model.name_or_path", "data.train", "train.lr", "model.lora"} & FREE_KEYS
    # the same data named relatively and absolutely is the same data
    rel = {**a, "data": {**a["data"], "train": ["chat.jsonl"]}}
    monkeypatch.chdir(tmp_path)
    assert resume_mismatch(rel, a) == {}


def checkpoints(tmp_path):
    return sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*"))


def test_resume_only_when_the_recorded_config_agrees(tmp_path, monkeypatch):
    train_from_config(config(tmp_path))
    assert checkpoints(tmp_path) == ["checkpoint-1"]

    # other lr and other data: refused, naming both keys and the ways on
    other_data = rows_file(tmp_path, "other.jsonl")
    with pytest.raises(ResumeError) as err:  # train rl's error: `train sft` exits 2 on it, as `train rl` does
        train_from_config(config(tmp_path, train__lr=5e-3, data__train=[other_data]))
    msg = str(err.value)
    assert "train.lr: 0.001 there, 0.005 now" in msg and "data.train" in msg and "other.jsonl" in msg
    assert "--fresh" in msg and "run.resume=" in msg and "checkpoint-1" in msg
    assert checkpoints(tmp_path) == ["checkpoint-1"]  # nothing was touched
    assert json.loads((tmp_path / "run" / "config.json").read_text())["train"]["lr"] == 1e-3

    # same settings, one more epoch: resumes (step 1 is not trained again)
    train_from_config(config(tmp_path, train__epochs=2))
    logged = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "loss" in r] == [1, 2]
    assert checkpoints(tmp_path) == ["checkpoint-1", "checkpoint-2"]

    # asked explicitly: a named checkpoint resumes whatever the settings
    ckpt = str(tmp_path / "run" / "checkpoint-2")
    out = train_from_config(config(tmp_path, train__lr=5e-3, train__epochs=2, run__resume=ckpt))
    assert max(r["step"] for r in out["log_history"] if "loss" in r) == 2
    assert checkpoints(tmp_path) == ["checkpoint-1", "checkpoint-2"]  # already at 2 epochs: nothing new

    # fresh: the earlier checkpoints, metrics, model and manifest go, the new run starts at step 1
    from musacoder.manifest import read_manifest

    seen = {}

    def train_and_look(self, *args, **kwargs):  # what the folder holds while the fresh run trains
        seen["manifest"] = read_manifest(tmp_path / "run")
        seen["final"] = (tmp_path / "run" / "final").exists()
        return original(self, *args, **kwargs)

    import trl

    original = trl.SFTTrainer.train
    monkeypatch.setattr(trl.SFTTrainer, "train", train_and_look)
    train_from_config(config(tmp_path, train__lr=5e-3, run__resume=False))
    assert seen == {"manifest": None, "final": False}
    assert read_manifest(tmp_path / "run").stage == "sft"
    assert checkpoints(tmp_path) == ["checkpoint-1"]
    logged = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "loss" in r] == [1]
    assert json.loads((tmp_path / "run" / "config.json").read_text())["train"]["lr"] == 5e-3


def test_rows_rewritten_under_the_same_path_are_not_resumed_silently(tmp_path):
    train_from_config(config(tmp_path))
    recorded = json.loads((tmp_path / "run" / "data.json").read_text())
    assert list(recorded) == [str((tmp_path / "chat.jsonl").resolve())]
    longer = config(tmp_path, train__epochs=2)
    forced = config(tmp_path, train__epochs=2, run__resume=str(tmp_path / "run" / "checkpoint-1"))
    rows_file(tmp_path, n=9)  # the data stage ran again into the same file
    with pytest.raises(ResumeError, match=r"run on other data: .*chat\.jsonl changed since.*--fresh"):
        train_from_config(longer)
    train_from_config(forced)  # a named checkpoint: resumed whatever the rows
    assert json.loads((tmp_path / "run" / "data.json").read_text()) != recorded


def test_checkpoints_without_a_recorded_config_are_not_resumed_silently(tmp_path):
    train_from_config(config(tmp_path))
    (tmp_path / "run" / "config.json").unlink()
    with pytest.raises(ResumeError, match="no readable config.json"):
        train_from_config(config(tmp_path))
