"""Rows → the per-epoch training set: file reading, dropped and truncated rows, RFT redraws, actionable errors."""

import json

import pytest

pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[train]' (or .[dev])")

from musacoder.sft.dataset import EpochDataset, data_files, detect_kind, load_rows  # noqa: E402
from musacoder.sft.examples import IGNORE_INDEX  # noqa: E402
from musacoder.sft.tokenizer import chat_byte_tokenizer  # noqa: E402


def conv(prompt: str, answer: str) -> dict:
    return {"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]}


def target(tok, item) -> str:
    return tok.decode([t for t in item["labels"] if t != IGNORE_INDEX], skip_special_tokens=True).strip()


@pytest.fixture(scope="module")
def tok():
    return chat_byte_tokenizer()


def test_long_prompts_are_dropped_long_targets_truncated(tok):
    rows = [conv("short", "ok"), conv("x" * 200, "never seen"), conv("short", "y" * 200)]
    ds = EpochDataset(rows, tok, max_len=64)
    assert len(ds) == 2 and ds.stats["dropped_too_long"] == 1 and ds.stats["truncated"] == 1
    assert target(tok, ds[0]) == "ok" and len(ds[1]["input_ids"]) == 64
    with pytest.raises(IndexError):
        ds[2]
    with pytest.raises(ValueError, match="raise data.max_seq_len"):
        EpochDataset(rows[1:2], tok, max_len=64)


def test_bad_rows_name_their_file_and_index(tmp_path, tok):
    (tmp_path / "a.jsonl").write_text(json.dumps(conv("p", "a")) + "\n" +
                                      json.dumps({"messages": [{"role": "user", "content": "no answer"}]}) + "\n")
    rows, origins = load_rows([str(tmp_path)])
    assert origins == [f"{tmp_path / 'a.jsonl'}#0", f"{tmp_path / 'a.jsonl'}#1"]
    assert detect_kind(rows) == "sft"
    with pytest.raises(ValueError, match=r"a\.jsonl#1: the conversation has no assistant message"):
        EpochDataset(rows, tok, 64, origins=origins)
    with pytest.raises(FileNotFoundError, match="matches no file"):
        data_files([str(tmp_path / "*.parquet")])
    with pytest.raises(ValueError, match=r"a\.jsonl#0: a row without `pool`"):
        detect_kind(rows, "rft", origins)


def test_rft_draws_a_member_per_epoch(tok):
    rows = [{"prompt": f"p{i}", "pool": [f"first{i}", f"second{i}", f"third{i}"]} for i in range(3)]
    calls = []

    def draw_epoch(rows, epoch, seed):
        calls.append((epoch, seed))
        return [conv(r["prompt"], r["pool"][(epoch + seed) % 3]) for r in rows]

    assert detect_kind(rows) == "rft"
    ds = EpochDataset(rows, tok, 64, kind="rft", seed=1, drawer=draw_epoch)
    assert [target(tok, ds[i]) for i in range(3)] == ["second0", "second1", "second2"]
    ds.set_epoch(1)
    assert [target(tok, ds[i]) for i in range(3)] == ["third0", "third1", "third2"]
    ds.set_epoch(1)  # same epoch: no redraw
    assert calls == [(0, 1), (1, 1)] and len(ds) == 3
    assert ds.to_hf()[0]["labels"] == ds[0]["labels"]


def test_rft_rows_in_the_data_schema_through_the_real_draw_epoch(tok, tmp_path):
    rft = pytest.importorskip("musacoder.data.rft")
    if not hasattr(rft, "draw_epoch"):
        pytest.skip("musacoder.data.rft.draw_epoch not present")
    prompt = [{"role": "system", "content": "Write kernels."}, {"role": "user", "content": "ReLU"}]
    rows = [{"task": f"t{i}", "prompt": prompt,
             "pool": [{"response": f"kernel{i}{c}", "sample": j, "cluster": j, "cluster_size": 1, "speedup": 1.0}
                      for j, c in enumerate("abc")]} for i in range(8)]
    import datasets

    (tmp_path / "rft").mkdir()
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "rft" / "data.parquet"))
    (tmp_path / "rft" / "README.md").write_text("card")  # the dataset card beside it is not data
    loaded, origins = load_rows([str(tmp_path / "rft")])
    assert detect_kind(loaded) == "rft" and len(loaded) == 8
    ds = EpochDataset(loaded, tok, 128, kind="rft", seed=0, origins=origins)
    epoch0 = [target(tok, ds[i]) for i in range(8)]
    assert all(t.startswith(f"kernel{i}") for i, t in enumerate(epoch0))
    ds.set_epoch(1)
    epoch1 = [target(tok, ds[i]) for i in range(8)]
    assert all(t.startswith(f"kernel{i}") for i, t in enumerate(epoch1)) and epoch1 != epoch0
    assert epoch0 == [target(tok, x) for x in EpochDataset(loaded, tok, 128, kind="rft", seed=0)]  # reproducible
