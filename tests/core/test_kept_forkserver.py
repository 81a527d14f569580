"""The fork server `musacoder verify` keeps for its next call: found again by another client, only by this user,
only for the same worker configuration, its workers reported to their own client, killed when that client dies, and
gone (with its files) after its idle time."""

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from musacoder.judge import forkserver
from musacoder.judge.sandbox import Sandbox, start_fork_server


def _wait(cond, timeout=15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


@pytest.fixture
def kept_env(monkeypatch):
    """A worker configuration of this test's own (so its kept server is no one else's) and a short idle time."""
    monkeypatch.setenv(forkserver.IDLE_ENV, "3")
    return {"MUSACODER_TEST_KEPT": uuid.uuid4().hex}


def _client(monkeypatch, cache: Path, env: dict) -> forkserver._Registry:
    """A fresh registry, as a new `musacoder verify` process has, with the kept server started or found for `env`."""
    reg = forkserver._Registry()
    monkeypatch.setattr(forkserver, "FORK_SERVERS", reg)
    start_fork_server(cache, env, keep=True)
    return reg


def test_a_second_client_finds_the_kept_server_and_only_its_own_workers_are_reported_to_it(tmp_path, monkeypatch,
                                                                                          kept_env):
    cache = tmp_path / "cache"
    reg1 = _client(monkeypatch, cache, kept_env)
    with Sandbox(cache, env=kept_env) as sb1:
        first = sb1.proc.server
        assert isinstance(sb1.proc, forkserver.ForkedProcess) and first.kept and first.proc is not None
        reg2 = _client(monkeypatch, cache, kept_env)
        with Sandbox(cache, env=kept_env) as sb2:
            second = sb2.proc.server
            assert second is not first and second.proc is None  # attached, not started
            assert second.pid == first.pid and second.kept
            assert sb2.request({"op": "exit"}, 60)["ok"]
            sb2.proc.wait(30)
        own_worker = sb1.proc.pid
        assert sb1.request({"op": "exit"}, 60)["ok"]
        assert sb1.proc.wait(30) == 0
    assert own_worker not in second._exits  # reported to its own client only
    reg2.clear()
    reg1.clear()  # disconnects: the kept server stays
    assert not _gone(first.pid)
    # after its idle time it exits on its own and removes its socket, pid file and folder
    assert _wait(lambda: _gone(first.pid), 30)
    assert not Path(first.workdir).exists()
    assert not [p for p in (first.path, Path(f"{first.path}.pid"), Path(f"{first.path}.lock")) if p.exists()]


def test_a_changed_configuration_gets_a_server_of_its_own(tmp_path, monkeypatch, kept_env):
    cache = tmp_path / "cache"
    reg = _client(monkeypatch, cache, kept_env)
    with Sandbox(cache, env=kept_env) as sb:
        first = sb.proc.server
    other = {"MUSACODER_TEST_KEPT": uuid.uuid4().hex}
    reg2 = _client(monkeypatch, cache, other)
    with Sandbox(cache, env=other) as sb:
        assert sb.proc.server.pid != first.pid
    name = forkserver.kept_name({"A": "1"}, [], True)
    assert name == forkserver.kept_name({"A": "1"}, [], True) != forkserver.kept_name({"A": "2"}, [], True)
    assert name != forkserver.kept_name({"A": "1"}, [], False)
    monkeypatch.setattr(forkserver, "_package_digest", lambda: "an edited package")
    assert name != forkserver.kept_name({"A": "1"}, [], True)
    for r in (reg, reg2):
        r.clear()


def test_a_client_that_dies_leaves_the_server_healthy_and_its_worker_killed(tmp_path, monkeypatch, kept_env):
    cache = tmp_path / "cache"
    script = ("import os, signal, sys, json\n"
              "from musacoder.judge.sandbox import Sandbox, start_fork_server\n"
              "env = json.loads(sys.argv[2])\n"
              "start_fork_server(sys.argv[1], env, keep=True)\n"
              "sb = Sandbox(sys.argv[1], env=env).__enter__()\n"
              "print(sb.proc.server.pid, sb.proc.pid, sb.workdir, flush=True)\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    import json

    run = subprocess.run([sys.executable, "-c", script, str(cache), json.dumps(kept_env)], capture_output=True,
                         text=True, timeout=180, env={**os.environ, forkserver.IDLE_ENV: "3"})
    assert run.returncode == -signal.SIGKILL, run.stderr[-2000:]
    server_pid, worker_pid, workdir = run.stdout.split()
    assert _wait(lambda: _gone(int(worker_pid)))  # nobody will read its verdict
    assert _wait(lambda: not Path(workdir).exists())
    assert not _gone(int(server_pid))
    reg = _client(monkeypatch, cache, kept_env)
    with Sandbox(cache, env=kept_env) as sb:  # the same server serves the next client
        assert sb.proc.server.pid == int(server_pid)
        assert sb.request({"op": "exit"}, 60)["ok"]
    reg.clear()


def test_a_listener_that_is_not_the_recorded_server_is_not_used(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir(mode=0o700)
    path = folder / "x.sock"
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    lsock.bind(str(path))
    lsock.listen(1)
    try:
        assert forkserver.attach_kept(path) is None  # no pid file
        Path(f"{path}.pid").write_text("1")
        assert forkserver.attach_kept(path) is None  # another pid than the listener's
        Path(f"{path}.pid").write_text(str(os.getpid()))
        assert forkserver.attach_kept(path) is None  # the right pid, but not a fork server
    finally:
        lsock.close()


def test_the_socket_folder_must_be_private(tmp_path):
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    assert forkserver.private_folder(base) == base / "forkservers"
    os.chmod(base / "forkservers", 0o755)
    with pytest.raises(OSError):
        forkserver.private_folder(base)


@pytest.mark.skipif(os.getuid() != 0, reason="connecting as another uid needs root")
def test_a_client_of_another_uid_is_refused():
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="kept-peer-", dir="/tmp"))  # pytest's own folders are closed to others
    path = folder / "s.sock"
    os.chmod(folder, 0o777)
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    lsock.bind(str(path))
    os.chmod(path, 0o777)
    lsock.listen(2)
    code = ("import os, socket, sys\nos.setgid(65534); os.setuid(65534)\n"
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(sys.argv[1])\n"
            "print(repr(s.recv(4096)))\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    state = forkserver._State()
    try:
        ready = __import__("select").select([lsock], [], [], 60)[0]
        assert ready
        forkserver._accept(state, lsock, {"ready": True})
        assert not state.clients
        assert child.communicate(timeout=60)[0].strip() == "b''"  # closed without a hello
    finally:
        child.kill()
        lsock.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_keeping_is_on_for_the_command_line_off_under_a_test_runner_and_by_choice(monkeypatch):
    monkeypatch.delenv(forkserver.KEEP_ENV, raising=False)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x")
    assert not forkserver.keep_wanted()
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    assert forkserver.keep_wanted()
    monkeypatch.setenv(forkserver.KEEP_ENV, "0")
    assert not forkserver.keep_wanted()
    monkeypatch.setenv(forkserver.KEEP_ENV, "1")
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x")
    assert forkserver.keep_wanted()
