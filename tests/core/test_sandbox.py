"""Sandbox edges: network namespace, scrubbed environment, process-group kill."""

import os
import socket
import subprocess
import sys
import time

import pytest

from musacoder.judge.sandbox import Sandbox, _worker_env, isolation_prefix

CONNECT = "import socket,sys; s=socket.socket(); s.settimeout(2); s.connect(('127.0.0.1', int(sys.argv[1]))); print('ok')"


@pytest.mark.skipif(not isolation_prefix(), reason="unshare --net not permitted here")
def test_worker_prefix_has_no_network():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = str(srv.getsockname()[1])
    try:
        outside = subprocess.run([sys.executable, "-c", CONNECT, port], capture_output=True, text=True, timeout=30)
        inside = subprocess.run([*isolation_prefix(), sys.executable, "-c", CONNECT, port], capture_output=True,
                                text=True, timeout=30)
    finally:
        srv.close()
    assert outside.stdout.strip() == "ok"
    assert inside.returncode != 0


def test_environment_is_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("HF_TOKEN", "hf-secret")
    env = _worker_env(tmp_path, tmp_path / "cache", None)
    assert "OPENAI_API_KEY" not in env and "HF_TOKEN" not in env
    assert env["HOME"] == str(tmp_path) and env["TMPDIR"] == str(tmp_path)


def test_close_kills_the_whole_process_group(tmp_path):
    with Sandbox(tmp_path / "cache") as sb:
        pid = sb.proc.pid
        workdir = sb.workdir
        assert workdir.exists()
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert not workdir.exists()


def test_prestarted_workers_are_fresh_per_use_and_cleared(tmp_path):
    from musacoder.judge import sandbox

    gpu = {"MUSACODER_PREWARM_DEVICE": "cuda:0"}  # only GPU verifications use workers started ahead
    with sandbox.prestarted_workers(2):
        with Sandbox(tmp_path, env=gpu) as first:
            pid1 = first.proc.pid
            assert first.request({"op": "exit"}, 60)["ok"]
        idle = [w.proc.pid for ws in sandbox.PRESTART._idle.values() for w in ws]
        assert idle and pid1 not in idle  # a used worker never goes back to the pool
        with Sandbox(tmp_path, env=gpu) as second:
            assert second.proc.pid in idle  # started ahead, used once
            assert second.request({"op": "exit"}, 60)["ok"]
        waiting = [w.proc for ws in sandbox.PRESTART._idle.values() for w in ws]
    assert sandbox.PRESTART._idle == {}
    assert all(p.poll() is not None for p in waiting)  # idle workers are killed when the batch ends
