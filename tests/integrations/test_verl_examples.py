"""examples/verl: the dataset script's rows, and (with verl) the GRPO config composed against verl's own schema and
the agent-loop entry instantiated the way verl's worker does it."""

import asyncio
import importlib
import sys
from pathlib import Path

import pytest

VERL_MISSING = ("verl is not installed: CI installs it beside .[dev] without its pins (see .ci/run): pip install "
                "--no-deps verl==0.9.1 hydra-core==1.3.8 omegaconf==2.3.0 antlr4-python3-runtime==4.9.3 "
                "tensordict==0.10.0 pyvers==0.1.0 orjson codetiming pylatexenc cachetools cloudpickle")

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "verl"


def test_make_dataset_rows(tmp_path):
    sys.path.insert(0, str(EXAMPLES))
    try:
        make_dataset = importlib.import_module("make_dataset")
    finally:
        sys.path.remove(str(EXAMPLES))
    rows = make_dataset.rows(REPO / "examples" / "tasks", "cpu", "mooreeval_agent")
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["tasks/linear_gelu", "tasks/relu",
                                                                  "tasks/scale_bias_sum"]
    r = rows[1]
    assert r["agent_name"] == "mooreeval_agent" and r["extra_info"] == {"backend": "cpu", "task_name": "tasks/relu"}
    assert [m["role"] for m in r["prompt"]] == ["system", "user"] and "torch.relu" in r["prompt"][1]["content"]
    pd = pytest.importorskip("pandas", reason="pandas writes the verl dataset (installed with .[dev])")
    pytest.importorskip("pyarrow", reason="pyarrow writes Parquet (installed with .[dev])")
    pd.DataFrame(rows).to_parquet(tmp_path / "d.parquet")
    back = pd.read_parquet(tmp_path / "d.parquet")
    assert list(back["reward_model"][1].values()) == ["rule", "tasks/relu"]


def test_grpo_config_composes_against_verls_schema():
    pytest.importorskip("verl", reason=VERL_MISSING)
    from hydra import compose, initialize_config_dir
    from verl.utils.config import omega_conf_to_dataclass

    with initialize_config_dir(config_dir=str(EXAMPLES), version_base=None):
        cfg = compose("musacoder_grpo")
    omega_conf_to_dataclass(cfg.algorithm)  # the trainer's own check of the algorithm section
    corr = cfg.algorithm.rollout_correction  # read as is by verl's trainer (ray_trainer.py)
    assert corr.rollout_rs == "mirrorpop" and corr.rollout_rs_threshold == 0.1 and corr.rollout_is is None
    from verl.utils.import_utils import load_extern_object

    fn = load_extern_object(cfg.reward.custom_reward_function.path, cfg.reward.custom_reward_function.name)
    assert asyncio.iscoroutinefunction(fn)
    hook = cfg.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook
    module, _, name = hook.rpartition(".")
    assert callable(getattr(importlib.import_module(module), name))
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "mooreeval_agent"


def test_agent_loop_entry_instantiates_like_verls_worker():
    pytest.importorskip("verl", reason=VERL_MISSING)
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap

    from test_verl import _tokenizer

    [entry] = OmegaConf.load(EXAMPLES / "agent_loops.yaml")
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 512, "response_length": 512,
                                                              "n": 8}}, "data": {}})

    async def make():
        return hydra.utils.instantiate(config=entry, trainer_config=DictConfigWrap(cfg), server_manager=None,
                                       tokenizer=_tokenizer(), processor=None, hf_model_type=None, dataset_cls=None,
                                       data_config=DictConfigWrap(cfg.data), tools=ToolListWrap([]))

    loop = asyncio.run(make())
    assert type(loop).__name__ == "MooreEvalAgentLoop"
    assert (loop.max_turns, loop.loss_turns, loop.alpha, loop.bonus) == (3, "first", 0.75, (0.2, 0.1))
    assert loop.retry.group_size == 8 and loop.retry.buffer.replay_prob == 0.1
