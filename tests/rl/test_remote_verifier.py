"""`env.verifier_url`: the RL trainer verifies through a live `musacoder serve` (uvicorn on a free port) instead of
in its own process; the service's verifier is a fake, so nothing builds."""

import socket
import string
import threading
import time

import pytest

from musacoder.records import Verdict
from musacoder.rl.config import EnvConfig, RLConfig
from musacoder.rl.env import verifier_from_config
from musacoder.rl.tokenizer import CharTokenizer

pytest.importorskip("fastapi", reason="fastapi is not installed: pip install -e '.[serve]' (or .[dev])")
pytest.importorskip("uvicorn", reason="uvicorn is not installed: pip install -e '.[serve]' (or .[dev])")
pytest.importorskip("transformers", reason="transformers is not installed: pip install -e '.[train]' (or .[dev])")


class ServerSideVerifier:
    """What the service runs: scores garbage by its vowels (never passes) and records what reached it."""

    def __init__(self):
        self.seen: list[tuple[str, str | None, int | None]] = []
        self._lock = threading.Lock()

    def __call__(self, task, candidate, backend=None, overrides=None, config=None) -> Verdict:
        with self._lock:
            self.seen.append((task.key, backend, config.trials if config else None))
        vowels = sum(c in "aeiouAEIOU" for c in candidate)
        return Verdict(status="incorrect", compiled=True, legal=True, pass_fraction=0.0, task=task.key,
                       reward=-1.0 + 0.25 * min(vowels, 4), feedback=f"{vowels} vowels; 0/5 trials passed")


@pytest.fixture
def service():
    import uvicorn

    from musacoder.service import ServiceConfig, create_app

    fake = ServerSideVerifier()
    app = create_app(ServiceConfig(token="s3cret", workers=2), verifier=fake)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    end = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < end, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", fake
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_no_url_means_the_in_process_verifier():
    assert verifier_from_config(EnvConfig()) is None


def test_trainer_verifies_through_the_service(tmp_path, relu_task, service):
    from musacoder.rl.trainer import train_from_config

    url, fake = service
    cfg = RLConfig.model_validate({
        "model": {"device": "cpu", "tiny": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64,
                                              "max_positions": 16384}},
        "env": {"kind": "kernel", "backend": "cpu", "max_workers": 4, "verify": {"trials": 2},
                "verifier_url": url, "verifier_token": "s3cret", "verifier_timeout_s": 60},
        "rollout": {"max_new_tokens": 8, "chunk_size": 4},
        "grpo": {"group_size": 4, "prompts_per_step": 1, "epochs": 1, "minibatch_size": 4, "lr": 1e-2},
        "multi_turn": {"single_turn_steps": 1, "max_turns": 2},
        "retry": {"capacity": 8, "replay_prob": 0.0},
        "run": {"steps": 2, "out_dir": str(tmp_path / "run"), "threads": 1, "tensorboard": False},
    })
    rows = train_from_config(cfg, tasks=[relu_task], tokenizer=CharTokenizer(string.printable))
    assert len(rows) == 2 and all(r["infra_errors"] == 0 for r in rows)  # every verdict came back over HTTP
    # distinct responses reached the service (identical ones share one verdict there), with the run's options
    assert 1 <= len(fake.seen) <= 4 + 4 * 2
    assert set(fake.seen) == {("level1/1_ReLU", "cpu", 2)}
    assert all(-1.0 <= r["reward_mean"] <= 0.0 for r in rows)


def test_a_wrong_token_is_an_infra_error_not_a_score(tmp_path, relu_task, service):
    """A refused request says nothing about the response: the episode records infra_error (no learning from it)."""
    from musacoder.rl.env import KernelEnv

    url, fake = service
    remote = verifier_from_config(EnvConfig(verifier_url=url, verifier_token="wrong"))
    env = KernelEnv(remote, backend="cpu", max_turns=1)
    env.reset(relu_task)
    _, score, done = env.step("some answer")
    assert done and env.history[0].status == "infra_error" and "bearer token" in env.history[0].feedback
    assert fake.seen == []
