"""`musacoder serve`: it refuses to listen beyond loopback without a token, and on loopback it verifies a real
candidate end to end (cpu backend, the example ReLU, whose build is cached after the first run)."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import typer
from conftest import RELU_CPU
from typer.testing import CliRunner

from musacoder.client import RemoteVerifier
from musacoder.config import VerifyConfig
from musacoder.service.auth import BindError, check_bind, is_loopback, token_matches
from musacoder.service.cli import register

LAUNCH = ("import typer; from musacoder.service.cli import register; app = typer.Typer(); "
          "app.callback()(lambda: None); register(app); app()")


def cli_app():
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    return app


def test_loopback_and_tokens():
    for host in ("127.0.0.1", "localhost", "::1", "127.1.2.3"):
        assert is_loopback(host)
        check_bind(host, None)
    for host in ("0.0.0.0", "::", "10.0.0.5", "example.org", ""):
        assert not is_loopback(host)
        with pytest.raises(BindError, match="--token"):
            check_bind(host, None)
        check_bind(host, "t")
    assert token_matches("Bearer abc", "abc") and token_matches("bearer abc", "abc")
    assert not token_matches("Bearer abd", "abc") and not token_matches("abc", "abc") and not token_matches(None, "abc")


def test_serve_refuses_an_open_public_bind(tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli_app(), ["serve", "--host", "0.0.0.0"], env={"MUSACODER_SERVICE_TOKEN": ""})
    assert r.exit_code == 2 and "refusing to listen on '0.0.0.0' without a token" in r.output
    r = runner.invoke(cli_app(), ["serve", "--task-root", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "is not a folder" in r.output


def test_serve_verifies_a_real_candidate(task_root, tmp_path):
    """The real local pool behind HTTP: the example ReLU's C++ candidate is `ok` with reward 1."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    log = open(tmp_path / "serve.log", "w+")
    env = {k: v for k, v in os.environ.items() if k != "MUSACODER_SERVICE_TOKEN"}
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, "serve", "--task-root", str(task_root),
                             "--port", str(port), "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        with RemoteVerifier(f"http://127.0.0.1:{port}", retries=0, timeout_s=300) as remote:
            end = time.monotonic() + 60
            while True:
                try:
                    remote.health()
                    break
                except Exception:
                    assert proc.poll() is None and time.monotonic() < end, (log.seek(0), log.read())[1]
                    time.sleep(0.2)
            light = VerifyConfig(trials=1, structured_trials=0, time_candidate=False)
            v = remote.verify("level1/19_ReLU", RELU_CPU.read_text(), backend="cpu", config=light)
        assert v.status == "ok" and v.reward == 1.0 and v.task == "level1/19_ReLU" and v.device == "cpu", v.feedback
        assert v.stage_s.get("correctness", 0) > 0
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
