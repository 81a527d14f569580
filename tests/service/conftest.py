"""Shared pieces of the service tests: a fake verifier (no builds), a task root, and a live server on a free port."""

import contextlib
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="fastapi is not installed: pip install -e '.[serve]' (or .[dev])")
pytest.importorskip("httpx", reason="httpx is not installed: pip install -e '.[serve]' (or .[dev])")

from musacoder.records import Verdict  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RELU_TASK = REPO / "examples" / "tasks" / "relu.py"
RELU_CPU = REPO / "examples" / "candidates" / "relu_cpu.py"


class FakeVerifier:
    """Answers `ok` with the candidate echoed in `feedback` after `delay_s`; counts calls. A candidate starting
    with `raise` makes it raise; while `gate` is set to an unset Event, calls wait on it."""

    def __init__(self, delay_s: float = 0.0, gate: threading.Event | None = None):
        self.delay_s, self.gate = delay_s, gate
        self.calls: list[str] = []
        self.seen: list[dict] = []  # every call's arguments
        self._lock = threading.Lock()

    def __call__(self, task, candidate, backend=None, overrides=None, config=None):
        with self._lock:
            self.calls.append(candidate)
            self.seen.append({"task": task, "backend": backend, "overrides": overrides, "config": config})
        if self.gate is not None:
            self.gate.wait(10)
        if candidate.startswith("raise"):
            raise RuntimeError("the fake verifier broke")
        if self.delay_s:
            time.sleep(self.delay_s)
        return Verdict(status="ok", compiled=True, legal=True, correct=True, pass_fraction=1.0, reward=1.0,
                       task=task.key, backend=backend, device="cpu", feedback=f"echo:{candidate}",
                       stage_s={"build": 0.001, "correctness": self.delay_s})


@pytest.fixture
def task_root(tmp_path):
    """A KernelBench-shaped root holding level1/19_ReLU.py (the CPU-sized example ReLU)."""
    (tmp_path / "kb" / "level1").mkdir(parents=True)
    shutil.copy(RELU_TASK, tmp_path / "kb" / "level1" / "19_ReLU.py")
    (tmp_path / "secret.py").write_text(RELU_TASK.read_text())  # outside the root
    return tmp_path / "kb"


@pytest.fixture
def make_client():
    """make_client(verifier, **ServiceConfig fields) -> a started TestClient; stopped after the test."""
    from fastapi.testclient import TestClient

    from musacoder.service import ServiceConfig, create_app

    stack = contextlib.ExitStack()

    def make(verifier, **cfg):
        app = create_app(ServiceConfig(**cfg), verifier=verifier)
        return stack.enter_context(TestClient(app))

    with stack:
        yield make


@contextlib.contextmanager
def live_server(app):
    """Run `app` under uvicorn on a free loopback port in a thread; yields its base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    end = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < end, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
