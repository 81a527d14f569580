"""`train sft` end to end on a tiny from-config model (no downloads): the final-turn loss falls, final/ loads through
the RL and bench loaders, RFT redraws its pools every epoch, and a run resumes from its checkpoint."""

import json
import random

import pytest
import torch

pytest.importorskip("trl", reason="trl is not installed: pip install -e '.[train]' (or .[dev])")
datasets = pytest.importorskip("datasets", reason="datasets is not installed: pip install -e '.[train]' (or .[dev])")

from musacoder.rl.config import RLConfig  # noqa: E402
from musacoder.sft.config import SFTConfig  # noqa: E402
from musacoder.sft.dataset import EpochDataset  # noqa: E402
from musacoder.sft.trainer import build_model, build_tokenizer, train_from_config  # noqa: E402

TINY = {"tiny": {"layers": 2, "hidden": 64, "heads": 4, "intermediate": 128}, "gradient_checkpointing": False}


def chat_rows(n: int, seed: int = 0) -> list[dict]:
    """Echo tasks; odd rows are repairs whose first answer is wrong (context only) and whose final answer is right."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        word = "".join(rng.choice("abcdefgh") for _ in range(4))
        user = {"role": "user", "content": f"echo {word}"}
        if i % 2:
            rows.append({"messages": [user, {"role": "assistant", "content": "zzzz"},
                                      {"role": "user", "content": "=== System Feedback for Round 1 ===\nwrong"},
                                      {"role": "assistant", "content": word}], "loss_turn": 3})
        else:
            rows.append({"messages": [user, {"role": "assistant", "content": word}], "loss_turn": None})
    return rows


def write_data(tmp_path, rows) -> list[str]:
    """Half the rows as JSONL, half as a Parquet directory: both readers are exercised."""
    half = len(rows) // 2
    jsonl = tmp_path / "part0.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows[:half]))
    (tmp_path / "pq").mkdir()
    datasets.Dataset.from_list(rows[half:]).to_parquet(str(tmp_path / "pq" / "part1.parquet"))
    return [str(jsonl), str(tmp_path / "pq")]


def target_loss(model, dataset) -> float:
    """Mean cross-entropy over the labelled (final-turn) tokens of the whole dataset."""
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(len(dataset)):
            ex = dataset[i]
            ids, labels = torch.tensor([ex["input_ids"]]), torch.tensor([ex["labels"]])
            n = int((labels[:, 1:] != -100).sum())
            total += float(model(input_ids=ids, labels=labels).loss) * n
            count += n
    return total / count


def config(tmp_path, data, **sections) -> SFTConfig:
    cfg = {"model": TINY, "data": {"train": data, "max_seq_len": 128},
           "train": {"lr": 5e-3, "epochs": 2, "batch_size": 8},
           "run": {"out_dir": str(tmp_path / "run"), "logging_steps": 1, "threads": 2}}
    for name, values in sections.items():
        cfg[name] = {**cfg.get(name, {}), **values}
    return SFTConfig.model_validate(cfg)


@pytest.mark.slow
def test_sft_loss_falls_and_final_loads_in_rl_and_bench(tmp_path):
    cfg = config(tmp_path, write_data(tmp_path, chat_rows(48)))
    tok = build_tokenizer(cfg)
    model = build_model(cfg, tok)
    rows = [json.loads(line) for line in (tmp_path / "part0.jsonl").read_text().splitlines()]
    probe = EpochDataset(rows, tok, 128)
    before = target_loss(model, probe)

    out = train_from_config(cfg, model=model, tokenizer=tok)

    after = target_loss(model, probe)
    print(f"final-turn loss before {before:.3f} after {after:.3f}")
    assert before > 4.5  # random init: about ln(259) = 5.56
    assert after < 0.6 * before, (before, after)
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in logged if "loss" in r]
    assert len(losses) == 12 and losses[-1] < 0.6 * losses[0], losses  # 48 rows / 8 × 2 epochs
    assert out["data"]["kind"] == "sft" and out["data"]["rows"] == 48

    final = tmp_path / "run" / "final"
    # train rl: model.name_or_path = final/
    from musacoder.rl.trainer import build_policy
    from musacoder.rl.trainer import build_tokenizer as rl_tokenizer

    rl_cfg = RLConfig.model_validate({"model": {"name_or_path": str(final), "device": "cpu"}})
    rl_tok = rl_tokenizer(rl_cfg)
    policy = build_policy(rl_cfg, rl_tok)
    assert rl_tok.chat_template and rl_tok.eos_token_id == tok.eos_token_id
    trained = model.state_dict()
    for name, value in policy.state_dict().items():
        assert torch.equal(value, trained[name]), name
    # bench --model hf:final
    from musacoder.models import make_client
    from musacoder.models.base import ChatRequest, Sampling

    client = make_client(f"hf:{final}", {"device": "cpu"})
    req = ChatRequest(id="echo-0-1", task="echo", messages=({"role": "user", "content": "echo abcd"},))
    [(_, completion)] = list(client.generate([req], Sampling(temperature=0.0, max_tokens=8)))
    assert isinstance(completion.text, str) and completion.error is None, completion


def test_rft_redraws_each_epoch_and_resumes(tmp_path, monkeypatch):
    draws: list[int] = []

    def draw_epoch(rows, epoch, seed):  # the musacoder.data.rft contract: one conversation per row, in order
        draws.append(epoch)
        return [{"messages": [{"role": "user", "content": r["prompt"]},
                              {"role": "assistant", "content": r["pool"][(epoch + seed) % len(r["pool"])]}]}
                for r in rows]

    monkeypatch.setattr("musacoder.sft.dataset.rft_drawer", lambda: draw_epoch)
    rows = [{"prompt": f"p{i}", "pool": [f"first{i}", f"second{i}"]} for i in range(4)]
    (tmp_path / "rft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = config(tmp_path, [str(tmp_path / "rft.jsonl")], train={"epochs": 1, "batch_size": 4})
    out = train_from_config(cfg)
    assert out["data"]["kind"] == "rft" and draws == [0]
    assert sorted((tmp_path / "run").glob("checkpoint-*"))[-1].name == "checkpoint-1"

    draws.clear()
    longer = cfg.model_copy(update={"train": cfg.train.model_copy(update={"epochs": 2})})
    out = train_from_config(longer)  # resumes from checkpoint-1, runs epoch 1 only, drawing the second members
    assert draws == [0, 1]
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "loss" in r] == [1, 2]  # step 1 was not trained again
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]

    draws.clear()
    fresh = longer.model_copy(update={"run": longer.run.model_copy(update={"resume": False})})
    train_from_config(fresh)  # both epochs again; the log starts over
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert draws == [0, 1] and [r["step"] for r in logged if "loss" in r] == [1, 2]
