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
    assert r["agent_name"] == "mooreeval_agent"
    assert r["extra_info"] == {"backend": "cpu", "task_name": "tasks/relu", "split": "train"}
    from musacoder.integrations.verl import is_validation_row

    val = make_dataset.rows(REPO / "examples" / "tasks", "cpu", "mooreeval_agent", "val")
    assert all(is_validation_row(v["extra_info"]) for v in val) and not is_validation_row(r["extra_info"])
    assert [m["role"] for m in r["prompt"]] == ["system", "user"] and "torch.relu" in r["prompt"][1]["content"]
    pd = pytest.importorskip("pandas", reason="pandas writes the verl dataset (installed with .[dev])")
    pytest.importorskip("pyarrow", reason="pyarrow writes Parquet (installed with .[dev])")
    pd.DataFrame(rows).to_parquet(tmp_path / "d.parquet")
    back = pd.read_parquet(tmp_path / "d.parquet")
    assert list(back["reward_model"][1].values()) == ["rule", "tasks/relu"]


def _compose_like_main_ppo(*overrides: str):
    """The config `python -m verl.trainer.main_ppo --config-path examples/verl --config-name musacoder_grpo` builds:
    our file as the primary config, verl's config folder on the search path (its `hydra.searchpath`)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(EXAMPLES), version_base=None):
        return compose("musacoder_grpo", overrides=["actor_rollout_ref.model.path=Qwen/Qwen3-8B", *overrides])


def _verl_startup_checks(cfg) -> None:
    """What verl 0.9.1 checks before the first step: main_ppo.main's `validate_config` (the actor's
    `__post_init__`/`validate` with the micro batch sizes, the rollout's log-prob micro batch, the batch
    divisibility), the typed sections the trainer and workers build (`AlgoConfig`, `RolloutConfig`,
    `CheckpointEngineConfig`), the tracking backends, the policy loss the actor looks up, and the worker's split of a
    mini-batch over the data-parallel ranks (engine_workers.py `train_mini_batch`)."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.utils.device import auto_set_device
    from verl.utils.import_utils import import_external_libs
    from verl.utils.tracking import Tracking

    auto_set_device(cfg)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    omega_conf_to_dataclass(cfg.algorithm)
    omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout.checkpoint_engine)
    for backend in cfg.trainer.logger:
        assert backend in Tracking.supported_backend, backend
    import_external_libs(cfg.actor_rollout_ref.model.get("external_lib"))  # as HFModelConfig.__post_init__ does
    get_policy_loss_fn(cfg.actor_rollout_ref.actor.policy_loss.loss_mode)
    n_gpus = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    mini_responses = cfg.actor_rollout_ref.actor.ppo_mini_batch_size * cfg.actor_rollout_ref.rollout.n
    assert mini_responses % n_gpus == 0, f"mini-batch of {mini_responses} responses over {n_gpus} ranks"


def test_grpo_config_passes_verls_own_startup_checks():
    pytest.importorskip("verl", reason=VERL_MISSING)
    cfg = _compose_like_main_ppo()
    _verl_startup_checks(cfg)
    a, r, t = cfg.actor_rollout_ref.actor, cfg.actor_rollout_ref.rollout, cfg.trainer
    # the paper's batch is 64 responses: verl counts prompts, each sampled n times
    assert cfg.data.train_batch_size * r.n == 64 and r.n == 8
    assert a.ppo_mini_batch_size * r.n == 16 and a.ppo_epochs == 2  # the embedded trainer's minibatch and epochs
    assert t.save_freq > 0 and t.default_local_dir and t.resume_mode == "auto"
    assert set(t.logger) - {"console"}, "a tracker that keeps the curves (tensorboard or wandb)"
    assert a.policy_loss.loss_mode == "mirrorpop" and a.policy_loss.rollout_correction.rollout_rs_threshold == 0.1
    # MirrorPop against the sampler's log-probs: v1's bypass mode copies rollout_log_probs into old_log_probs and
    # keeps loss_mode (trainer_base._compute_old_log_prob); the legacy trainer would replace loss_mode
    corr = cfg.algorithm.rollout_correction
    assert corr.bypass_mode and t.use_v1 and r.calculate_log_probs and corr.rollout_rs is None
    assert cfg.data.val_files != cfg.data.train_files
    from musacoder.integrations.verl import mirrorpop_delta
    from verl.utils.config import omega_conf_to_dataclass

    assert mirrorpop_delta(omega_conf_to_dataclass(a)) == 0.1  # δ as the actor worker's typed config carries it
    from verl.utils.import_utils import load_extern_object

    fn = load_extern_object(cfg.reward.custom_reward_function.path, cfg.reward.custom_reward_function.name)
    assert asyncio.iscoroutinefunction(fn)
    assert r.agent.default_agent_loop == "mooreeval_agent" and (REPO / r.agent.agent_loop_config_path).is_file()


def test_external_lib_registers_the_loss_in_a_fresh_process():
    """What a verl worker does with `model.external_lib` (HFModelConfig.__post_init__ → import_external_libs): in a
    process that never imported musacoder, the import alone makes `mirrorpop` a policy loss."""
    pytest.importorskip("verl", reason=VERL_MISSING)
    import subprocess

    code = ("import sys\n"
            "from verl.trainer.ppo.core_algos import POLICY_LOSS_REGISTRY, get_policy_loss_fn\n"
            "from verl.utils.import_utils import import_external_libs\n"
            "assert 'mirrorpop' not in POLICY_LOSS_REGISTRY and 'musacoder' not in sys.modules\n"
            "import_external_libs(sys.argv[1])\n"
            "print(get_policy_loss_fn('mirrorpop').__name__)\n")
    from omegaconf import OmegaConf

    lib = OmegaConf.load(EXAMPLES / "musacoder_grpo.yaml").actor_rollout_ref.model.external_lib
    done = subprocess.run([sys.executable, "-c", code, lib], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "mirrorpop_policy_loss"


def test_verls_startup_checks_reject_what_they_should():
    """The checks above can fail: the micro batch sizes the file once lacked, a batch the ranks cannot split, and a
    policy loss nobody registered."""
    pytest.importorskip("verl", reason=VERL_MISSING)
    for overrides, message in (
            (["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null"], "ppo_micro_batch_size"),
            (["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null"], "log_prob_micro_batch_size"),
            (["data.train_batch_size=1", "actor_rollout_ref.rollout.n=3",
              "actor_rollout_ref.actor.ppo_mini_batch_size=1"],
             "real_train_batch_size"),
            (["actor_rollout_ref.actor.policy_loss.loss_mode=no_such_loss"], "Unsupported loss mode")):
        with pytest.raises(Exception, match=message):
            _verl_startup_checks(_compose_like_main_ppo(*overrides))


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
    assert loop.retry.group_size == 8 and loop.retry.buffer.replay_prob == 0.1 and loop.single_turn_steps == 16
