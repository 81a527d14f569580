"""The training path chains through its output folders, on a CPU, with the documented commands: `musacoder data
solutions` (real MooreEval verification of pre-written responses) → `musacoder train sft` given the data folder →
`musacoder train rl` (kernel environment) given the SFT folder → `musacoder bench --model hf:FOLDER` on
KernelBench-small given the RL (and the SFT) folder. Each stage reads only what the previous one wrote, through its
musacoder.json; the models are tiny from-config Llamas, so nothing passes, but every hand-over is real."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="trl is not installed: pip install -e '.[train]' (or .[dev])")
pytestmark = pytest.mark.slow  # builds a C++ extension and trains (12-50 s on a 2-core machine)

from typer.testing import CliRunner  # noqa: E402

from musacoder.manifest import read_manifest, resolve_model  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SMALL = Path(os.environ.get("KERNELBENCH_SMALL_DIR", REPO.parent / "shared" / "kernelbench-small"))
RESPONSES = REPO / "examples" / "data" / "responses"
SFT_CONFIG = REPO / "examples" / "sft" / "chain_cpu.toml"
RL_CONFIG = REPO / "examples" / "rl" / "chain_cpu.toml"  # the kernel environment from the SFT folder, one step
TIMES: dict[str, float] = {}


def musacoder(*args: str) -> str:
    """Run `musacoder ARGS` in process; returns its output, failing the test with it on a non-zero exit."""
    from musacoder.cli import app

    start = time.perf_counter()
    result = CliRunner().invoke(app, list(args))
    TIMES[" ".join(args[:2])] = time.perf_counter() - start
    assert result.exit_code == 0, f"musacoder {' '.join(args)} exited {result.exit_code}:\n{result.output}" + (
        f"\n{result.exception!r}" if result.exception else "")
    return result.output


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """runs/chain/{data, sft} made by the documented commands, in a fresh working directory."""
    root = tmp_path_factory.mktemp("chain")
    cwd = os.getcwd()
    os.chdir(root)  # the commands as documented, with paths relative to the working directory
    try:
        Path("runs/chain/tasks").mkdir(parents=True)
        shutil.copy(REPO / "examples" / "tasks" / "relu.py", "runs/chain/tasks/relu.py")
        musacoder("data", "solutions", "runs/chain/tasks", "--model", f"dir:{RESPONSES}", "--backend", "cpu",
                  "--samples", "1", "--turns", "1", "--verify", "trials=1", "--verify", "time_candidate=false",
                  "--out", "runs/chain/data", "--no-progress")
        musacoder("train", "sft", "--config", str(SFT_CONFIG))
    finally:
        os.chdir(cwd)
    yield root
    print("stage seconds:", json.dumps({k: round(v, 1) for k, v in TIMES.items()}))


def bench(model_folder: str, out: str) -> dict:
    musacoder("bench", "--model", f"hf:{model_folder}", "--suite", f"dir:{SMALL / 'level1'}", "--tasks",
              "19_ReLU,23_Softmax", "--backend", "cpu", "--samples", "1", "--turns", "1", "--max-tokens", "16",
              "--model-arg", "device=cpu", "--out", out, "--no-progress")
    return json.loads(Path(out, "summary.json").read_text())


def test_data_folder_feeds_sft_and_the_sft_folder_feeds_bench(chain, monkeypatch):
    data = read_manifest(chain / "runs/chain/data")
    assert data.stage == "data" and data.files["sft"] == "sft.jsonl" and data.info["rows"]["solutions"] == 1
    sft = read_manifest(chain / "runs/chain/sft")
    assert sft.stage == "sft" and sft.files["model"] == "final" and sft.info["rows"] == 1
    assert sft.inputs["data"] == str((chain / "runs/chain/data").resolve())
    final = resolve_model(chain / "runs/chain/sft")
    assert (final / "tokenizer_config.json").exists() and (final / "model.safetensors").exists()
    logged = [json.loads(x) for x in (chain / "runs/chain/sft/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged if "loss" in r] == [1, 2]  # one row, two epochs

    if not SMALL.is_dir():
        pytest.skip(f"kernelbench-small not found at {SMALL} (set KERNELBENCH_SMALL_DIR)")
    monkeypatch.chdir(chain)
    summary = bench("runs/chain/sft", "runs/chain/bench_sft")
    run = read_manifest(chain / "runs/chain/bench_sft")
    assert run.stage == "bench" and run.files["run"] == "." and run.inputs["model"] == "hf:runs/chain/sft"
    assert run.inputs["model_path"] == str(final)
    verdicts = [json.loads(x) for x in (chain / "runs/chain/bench_sft/verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == 2 and summary["run"]["model"] == "hf:runs/chain/sft"


def test_sft_folder_feeds_rl_and_the_rl_folder_feeds_bench(chain, monkeypatch):
    monkeypatch.chdir(chain)
    out = musacoder("train", "rl", "--config", str(RL_CONFIG))
    assert "step     1" in out
    rl = read_manifest(chain / "runs/chain/rl")
    assert rl.stage == "rl" and rl.files["model"] == "final" and rl.info["env"] == "kernel"
    steps = [json.loads(x) for x in (chain / "runs/chain/rl/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps if "reward_mean" in r] == [1]  # one step on the kernel task, verified
    assert Path(rl.inputs["model"]).resolve() == (chain / "runs/chain/sft").resolve()
    final = resolve_model(chain / "runs/chain/rl")
    assert (final / "tokenizer_config.json").exists()
    from transformers import AutoTokenizer

    sft_tok = AutoTokenizer.from_pretrained(resolve_model(chain / "runs/chain/sft"))
    rl_tok = AutoTokenizer.from_pretrained(final)
    assert rl_tok.chat_template == sft_tok.chat_template and len(rl_tok) == len(sft_tok)  # the SFT model's tokenizer

    if not SMALL.is_dir():
        pytest.skip(f"kernelbench-small not found at {SMALL} (set KERNELBENCH_SMALL_DIR)")
    summary = bench("runs/chain/rl", "runs/chain/bench_rl")
    run = read_manifest(chain / "runs/chain/bench_rl")
    assert run.inputs["model_path"] == str(final) and summary["run"]["model"] == "hf:runs/chain/rl"
    verdicts = [json.loads(x) for x in (chain / "runs/chain/bench_rl/verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == 2
