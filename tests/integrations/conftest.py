"""A live `musacoder serve` (uvicorn on a free loopback port) whose verifier is a keyword fake: no builds."""

import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from musacoder.records import Verdict

pytest.importorskip("fastapi", reason="the service tests need fastapi: pip install -e '.[serve]'")
pytest.importorskip("uvicorn", reason="the service tests need uvicorn: pip install -e '.[serve]'")

RELU_TASK = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "relu.py"


class KeywordVerifier:
    """A response with PASS is ok (reward 1.5), HALF is half correct (−0.25), anything else fails to extract (−1).
    Records (task, candidate) of every call that reached the service."""

    def __init__(self):
        self.seen: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(self, task, candidate, backend=None, overrides=None, config=None) -> Verdict:
        with self._lock:
            self.seen.append((task.key, candidate))
        if "PASS" in candidate:
            return Verdict(status="ok", compiled=True, legal=True, correct=True, pass_fraction=1.0, speedup=2.0,
                           reward=1.5, task=task.key, feedback="All trials passed; make it faster.")
        if "HALF" in candidate:
            return Verdict(status="incorrect", compiled=True, legal=True, pass_fraction=0.5, reward=-0.25,
                           task=task.key, feedback="2/4 trials passed; fix correctness first.")
        return Verdict(status="extract_error", reward=-1.0, task=task.key, feedback="No code block found.")


@pytest.fixture
def service(tmp_path):
    """(url, KeywordVerifier) of a live service whose task root holds level1/19_ReLU and level1/20_Other."""
    import uvicorn

    from musacoder.service import ServiceConfig, create_app

    root = tmp_path / "kb" / "level1"
    root.mkdir(parents=True)
    shutil.copy(RELU_TASK, root / "19_ReLU.py")
    shutil.copy(RELU_TASK, root / "20_Other.py")
    fake = KeywordVerifier()
    app = create_app(ServiceConfig(task_root=tmp_path / "kb", workers=4, result_cache_size=0), verifier=fake)
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
