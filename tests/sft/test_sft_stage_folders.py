"""Stage folders chain: `train sft` takes a data stage's output folder as `data.train` (the rows its musacoder.json
names, not every .jsonl below it), writes its own manifest naming final/, and the next stages (`train sft` again,
`bench --model hf:FOLDER`) take that folder as written. Folders of the wrong kind are errors saying what to pass."""

import json

import pytest

pytest.importorskip("trl", reason="trl is not installed: pip install -e '.[train]' (or .[dev])")

from musacoder.data.dataset import write_data_manifest  # noqa: E402
from musacoder.manifest import Manifest, read_manifest, resolve_model, write_manifest  # noqa: E402
from musacoder.sft.config import SFTConfig  # noqa: E402
from musacoder.sft.dataset import load_rows  # noqa: E402
from musacoder.sft.trainer import train_from_config  # noqa: E402

TINY = {"tiny": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64}, "gradient_checkpointing": False}


def data_folder(tmp_path, n=8):
    """A data stage's output as `musacoder data solutions` lays it out: chat rows in sft.jsonl, and a bench-format
    run/ whose JSONL files are not chat rows."""
    out = tmp_path / "data"
    (out / "run").mkdir(parents=True)
    (out / "run" / "verdicts.jsonl").write_text(json.dumps({"task": "relu", "sample": 0, "verdict": {}}) + "\n")
    (out / "sft.jsonl").write_text("".join(
        json.dumps({"messages": [{"role": "user", "content": f"echo {i}"}, {"role": "assistant", "content": str(i)}],
                    "loss_turn": None, "kind": "solution"}) + "\n" for i in range(n)))
    return out


def config(tmp_path, **sections) -> SFTConfig:
    cfg = {"model": TINY, "data": {"max_seq_len": 64}, "train": {"lr": 1e-3, "epochs": 1, "batch_size": 8},
           "run": {"out_dir": str(tmp_path / "sft"), "logging_steps": 1, "threads": 1}}
    for name, values in sections.items():
        cfg[name] = {**cfg.get(name, {}), **values}
    return SFTConfig.model_validate(cfg)


def test_a_data_folder_is_read_through_its_manifest(tmp_path):
    out = data_folder(tmp_path)
    # without a manifest the folder is searched as before, and the run's rows are named with what to pass
    from musacoder.sft.dataset import detect_kind

    rows, origins = load_rows([str(out)])
    with pytest.raises(ValueError) as err:
        detect_kind(rows, "auto", origins)
    assert "run/verdicts.jsonl#0: a row without `messages`" in str(err.value)
    assert "musacoder.json" in str(err.value) and "sft.jsonl" in str(err.value)
    # with the manifest: only the rows it names
    write_data_manifest(out, files={"sft": "sft.jsonl", "run": "run"})
    rows, origins = load_rows([str(out)])
    assert len(rows) == 8 and all(o.startswith(str(out / "sft.jsonl")) for o in origins)


def test_folders_without_rows_are_refused_with_what_to_pass(tmp_path):
    bench = tmp_path / "bench"
    write_manifest(bench, Manifest(stage="bench", files={"run": "."}))
    with pytest.raises(ValueError, match=r"'bench' stage and holds no training rows.*musacoder data solutions"):
        load_rows([str(bench)])
    out = data_folder(tmp_path)
    write_data_manifest(out, files={"sft": "gone.jsonl"})
    with pytest.raises(ValueError, match="do not exist; re-run the data stage"):
        load_rows([str(out)])
    with pytest.raises(ValueError, match="neither a model folder nor a stage folder"):
        resolve_model(out.parent)


def test_sft_from_a_data_folder_then_from_the_sft_folder_then_bench(tmp_path):
    out = data_folder(tmp_path)
    write_data_manifest(out, files={"sft": "sft.jsonl", "run": "run"})
    first = train_from_config(config(tmp_path, data={"train": str(out)}))  # one path as a string
    assert first["data"]["rows"] == 8
    sft = tmp_path / "sft"
    m = read_manifest(sft)
    assert m.stage == "sft" and m.files["model"] == "final" and m.files["metrics"] == "metrics.jsonl"
    assert m.inputs["data"] == str(out.resolve()) and m.inputs["model"] == "tiny" and m.info["rows"] == 8
    assert resolve_model(sft) == (sft / "final").resolve()
    assert (sft / "final" / "tokenizer_config.json").exists()

    # a second stage takes the first one's folder as its model
    cfg2 = config(tmp_path, data={"train": [str(out)]}, run={"out_dir": str(tmp_path / "sft2")},
                  model={"name_or_path": str(sft)})
    train_from_config(cfg2)
    assert read_manifest(tmp_path / "sft2").inputs["model"] == str((sft / "final").resolve())

    # bench --model hf:FOLDER
    from musacoder.models import make_client
    from musacoder.models.base import ChatRequest, Sampling

    client = make_client(f"hf:{sft}", {"device": "cpu"})
    req = ChatRequest(id="echo#s0#t1", task="echo", messages=({"role": "user", "content": "echo 3"},))
    [(_, completion)] = list(client.generate([req], Sampling(temperature=0.0, max_tokens=4)))
    assert isinstance(completion.text, str) and completion.error is None
    with pytest.raises(ValueError, match="'data' folder without a model"):
        make_client(f"hf:{out}", {"device": "cpu"})


def test_lora_run_names_its_adapter_and_rft_rows_make_an_rft_stage(tmp_path, monkeypatch):
    pytest.importorskip("peft", reason="peft is not installed: pip install -e '.[train]' (or .[dev])")
    out = data_folder(tmp_path)
    write_data_manifest(out, files={"sft": "sft.jsonl"})
    train_from_config(config(tmp_path, data={"train": [str(out)]}, model={"lora": {"r": 2, "alpha": 4}}))
    m = read_manifest(tmp_path / "sft")
    assert m.files["adapter"] == "adapter" and m.info["lora"] is True
    assert (tmp_path / "sft" / "adapter" / "adapter_config.json").exists()

    def draw_epoch(rows, epoch, seed):
        return [{"messages": [*r["prompt"], {"role": "assistant", "content": r["pool"][0]["response"]}]}
                for r in rows]

    monkeypatch.setattr("musacoder.sft.dataset.rft_drawer", lambda: draw_epoch)
    rft = tmp_path / "rft_data"
    rft.mkdir()
    (rft / "rft.jsonl").write_text("".join(json.dumps(
        {"task": f"t{i}", "prompt": [{"role": "user", "content": f"p{i}"}],
         "pool": [{"response": f"r{i}", "sample": 0, "cluster": 0, "cluster_size": 1, "speedup": 1.0}]}) + "\n"
        for i in range(4)))
    write_data_manifest(rft, files={"sft": "rft.jsonl"})
    train_from_config(config(tmp_path, data={"train": [str(rft)]}, run={"out_dir": str(tmp_path / "rft")}))
    m = read_manifest(tmp_path / "rft")
    assert m.stage == "rft" and m.info["kind"] == "rft" and "adapter" not in m.files
