"""A fork server for candidate workers: Python and torch imported once, a fresh process per candidate still.

Starting a worker with `python -m musacoder.judge.worker` imports torch every time, which costs seconds of CPU, and
far more wall time when many workers start at once beside builds (docs/benchmarks.md). The fork server
is started once per worker configuration (cache folder, toolchain variables, device, memory limit, network
isolation), with the same scrubbed environment and in the same network namespace a worker would get. It imports
torch and the worker's modules, and never asks the GPU driver anything, never starts a thread pool and never sees
candidate code. For each worker it forks a child, which then:

- is PID 1 of a PID namespace of its own where the host permits (the server makes a fresh one right before each
  fork; see `musacoder.judge.isolation`), so killing it kills everything it left behind;
- starts a session of its own (its own process group, killed whole afterwards, as before);
- keeps only its two protocol pipes and its log (every other inherited descriptor is closed, the server's control
  socket first);
- takes its own working directory and environment (HOME and TMPDIR are its throw-away folder);
- runs `worker.main`, which sets the resource limits, starts the thread pool and the CUDA context, and says `ready`.

The server is also its workers' subreaper (`PR_SET_CHILD_SUBREAPER`): a process a worker leaves behind (a `setsid`
daemon, a double fork) is re-parented to the server when its parent dies instead of to the host's init, and the server
kills every child of its own that is not a worker it forked (`_sweep`), within `SWEEP_S`. So nothing a candidate
starts outlives its worker even where the host permits neither PID namespaces nor a pids cgroup.

So each candidate still gets a process no other candidate ran in; only the imports are shared, copy-on-write. PyTorch's
own DataLoader forks after importing torch in the same way. CUDA cannot survive a fork, and torch refuses CUDA in the
child of any process that so much as counted its GPUs (every forked worker failed its start while the import of
`torch.utils.cpp_extension`, which calls `torch.cuda.is_available()`, reached the driver). So the
server imports without asking the driver, then forks a probe child to check that CUDA is still allowed there, and
refuses to start otherwise (workers then start with `python -m`).

The trusted side (`ForkServer`) talks to the server over a Unix `SOCK_SEQPACKET` socket pair: a request carries the
child's descriptors (`SCM_RIGHTS`), its folder and environment; the server answers with the child's pid and later
reports its exit status (it reaps its children). `FORK_SERVERS` keeps one server per configuration for the life of the
trusted process; `MUSACODER_FORK_SERVER=0` turns it off (every worker is then started with `python -m`).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

_MAX_MSG = 1 << 20
# Variables a worker reads only after the fork (its GPU, its address-space limit): they do not need servers of their
# own, so one server forks the workers of every GPU of a host.
AFTER_FORK_VARS = ("MUSACODER_PREWARM_DEVICE", "MUSACODER_AS_LIMIT")


# --------------------------------------------------------------------------------------------------------------------
# The server side (runs as `python -m musacoder.judge.forkserver FD`)
def _child(req: dict, fds: list[int]) -> None:
    """In the forked child: become a fresh worker, then run it. Never returns."""
    code = 70
    try:
        os.setsid()
        fd_in, fd_out, log = fds
        os.dup2(log, 1)
        os.dup2(log, 2)
        # the protocol pipes go to 3 and 4 (dup first: they may already sit there), then nothing else stays open
        fd_in, fd_out = os.dup(fd_in), os.dup(fd_out)
        os.dup2(fd_in, 3)
        os.dup2(fd_out, 4)
        os.closerange(5, _max_fd())
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None  # TMPDIR is the child's own folder now
        import torch

        if torch.cuda._is_in_bad_fork():  # checked by the server's probe; a worker that cannot use CUDA must not serve
            raise RuntimeError("torch refuses CUDA in this forked worker")
        from musacoder.judge import worker

        worker.main(3, 4)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported in the worker's log; the trusted side sees a start failure
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _max_fd() -> int:
    try:
        return max(int(x) for x in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return os.sysconf("SC_OPEN_MAX")


def _send(sock: socket.socket, msg: dict) -> None:
    sock.send(json.dumps(msg).encode())


def _preload() -> None:
    """Import what every worker imports before candidate code (`musacoder.judge.worker.setup.HARNESS_MODULES`)
    without touching the GPU driver. Asking the driver anything (even `torch.cuda.is_available()`,
    which `torch.utils.cpp_extension` calls at import only to log a warning) makes torch refuse CUDA in every forked
    child ("Cannot re-initialize CUDA in forked subprocess"), so that check answers False while importing."""
    import torch

    from musacoder.judge.worker import setup

    real = torch.cuda.is_available
    torch.cuda.is_available = lambda: False
    try:
        setup.prepare()
    finally:
        torch.cuda.is_available = real
    if torch.cuda.is_initialized():
        raise RuntimeError("CUDA was initialised while importing; a forked worker could not use it")
    pid = os.fork()  # a probe: would a forked child be allowed to use CUDA?
    if pid == 0:
        os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        raise RuntimeError("importing asked the GPU driver something, so torch refuses CUDA in forked children")


PR_SET_CHILD_SUBREAPER = 36
SWEEP_S = 0.25  # how often the server looks for adopted processes


def _children() -> set[int]:
    """This process's children (from /proc/self/task/*/children, else by scanning every process's parent)."""
    kids: set[int] = set()
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as f:
                kids.update(int(x) for x in f.read().split())
        return kids
    except OSError:
        pass
    me = os.getpid()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        kids.add(int(name))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def _sweep(workers: set[int]) -> None:
    """SIGKILL every child that is not one of `workers`: as the subreaper, the server adopts what workers left
    behind. (Their own children are adopted in turn when they die, and killed at the next sweep.)"""
    for pid in _children() - workers:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _abandon(folders: dict[int, str]) -> None:
    """The trusted process is gone without closing this server (killed, say by SIGTERM or the OOM killer): nobody will
    read these workers' verdicts. Kill them (their process groups) and whatever they left, then remove their folders
    and the server's own, so a killed verifier leaves neither processes nor folders behind."""
    for pid in folders:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        _sweep(set())
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                time.sleep(0.05)
        except ChildProcessError:
            break
    for folder in [*folders.values(), os.getcwd()]:
        name, parent = os.path.basename(folder), os.path.basename(os.path.dirname(folder))
        if name.startswith(("cand-", "forkserver-")) and parent.startswith("musacoder-"):  # only folders made for us
            shutil.rmtree(folder, ignore_errors=True)


def serve(fd: int) -> None:
    folders: dict[int, str] = {}  # each live worker's folder
    try:
        _serve(socket.socket(fileno=fd), folders)
    except OSError:  # a reply the trusted process, gone, could not take
        _abandon(folders)


def _serve(sock: socket.socket, folders: dict[int, str]) -> None:
    try:
        from musacoder.judge.worker.setup import drop_writable_import_paths

        drop_writable_import_paths()  # its own folder (`python -m` put it first): the forked workers inherit the path
        _preload()
    except BaseException as e:  # noqa: BLE001
        _send(sock, {"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    from musacoder.judge import isolation

    subreaper = isolation._prctl(PR_SET_CHILD_SUBREAPER, 1) == 0
    _send(sock, {"ready": True, "pid": os.getpid()})

    pid_namespaces = True  # until making one fails
    in_made_ns = False  # whether children are now forked into a namespace the server made
    workers: set[int] = set()
    last_sweep = 0.0
    while True:
        while True:  # reap children and report their workers' exit (as Popen.returncode: -N for signal N)
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in workers:
                workers.discard(pid)
                folders.pop(pid, None)
                _send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})
                last_sweep = 0.0  # what it left behind is adopted now
        if subreaper and time.monotonic() - last_sweep >= SWEEP_S:
            _sweep(workers)
            last_sweep = time.monotonic()
        ready, _, _ = select.select([sock], [], [], 0.05)
        if not ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_MSG, 3)
        except OSError:
            data, fds = b"", []
        if not data:  # the trusted process is gone
            return _abandon(folders)
        req = json.loads(data)
        sys.stdout.flush()
        sys.stderr.flush()
        wants = "pid" in str((req.get("env") or {}).get("MUSACODER_SANDBOX", "")).split(",")  # the worker's layers
        if pid_namespaces and (wants or in_made_ns):
            try:
                isolation.new_pid_namespace_for_next_child(fresh=wants)
                in_made_ns = wants
            except OSError as e:
                print(f"musacoder fork server: no PID namespaces for workers: {e}", file=sys.stderr)
                pid_namespaces = False
        try:
            pid = os.fork()
        except OSError as e:
            for f in fds:
                os.close(f)
            _send(sock, {"started": req["id"], "error": str(e)})
            continue
        if pid == 0:
            sock.close()
            _child(req, fds)
        workers.add(pid)
        folders[pid] = req["cwd"]
        for f in fds:
            os.close(f)
        _send(sock, {"started": req["id"], "pid": pid})


# --------------------------------------------------------------------------------------------------------------------
# The trusted side
class ForkServerError(RuntimeError):
    pass


def kill_group(proc) -> None:
    """SIGKILL the process group `proc` leads (it was started in a session of its own) and reap `proc` (a `Popen` or
    a `ForkedProcess`), waiting at most 10 s."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def file_tail(path: Path, n: int) -> str:
    """The last `n` bytes of a log as text ("" when it cannot be read)."""
    try:
        return path.read_bytes()[-n:].decode(errors="replace")
    except OSError:
        return ""


class ForkedProcess:
    """The slice of `subprocess.Popen` the sandbox uses (pid, poll, wait, returncode), for a child of the fork server."""

    def __init__(self, server: "ForkServer", pid: int):
        self.server, self.pid, self.returncode = server, pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            self.server.wait_for_exit(self.pid, 0.5 if left is None else min(left, 0.5))
        return self.returncode


class ForkServer:
    """One running fork server (see the module's docstring) and the reader of its reports."""

    def __init__(self, env: dict[str, str], workdir: Path, prefix: list[str], start_timeout_s: float = 180.0,
                 wait: bool = True):
        """Start the server; with `wait` (the default) also wait for it to say it is ready, else leave that to
        `await_ready` (so its imports run while the caller does other work)."""
        self.workdir = workdir
        self._deadline = time.monotonic() + start_timeout_s
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = open(workdir / "forkserver.log", "wb")
        try:
            self.proc = subprocess.Popen(
                prefix + [sys.executable, "-m", "musacoder.judge.forkserver", str(theirs.fileno())],
                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(theirs.fileno(),),
                start_new_session=True)
        finally:
            log.close()
            theirs.close()
        self.sock = ours
        self._cv = threading.Condition()
        self._send_lock = threading.Lock()
        self._started: dict[int, dict] = {}
        self._exits: dict[int, int] = {}
        self._live: set[int] = set()
        self._next_id = 0
        self.alive = False
        self.pending = True  # started, its hello not read yet
        if wait:
            self.await_ready()

    def await_ready(self) -> None:
        """Wait (until the start deadline) for the server's hello; raises ForkServerError (the server closed) when it
        did not start. Does nothing once the hello was read."""
        if not self.pending:
            if not self.alive:
                raise ForkServerError("the fork server is not running")
            return
        self.pending = False
        try:
            ready, _, _ = select.select([self.sock], [], [], max(0.0, self._deadline - time.monotonic()))
            hello = json.loads(self.sock.recv(_MAX_MSG) or b"{}") if ready else {}
        except (OSError, ValueError) as e:
            hello = {"error": str(e)}
        if not hello.get("ready"):
            self.close()
            raise ForkServerError(f"the fork server did not start: {hello.get('error') or 'no reply'}; "
                                  f"log: {self.log_tail()}")
        self.alive = True
        threading.Thread(target=self._read, daemon=True, name="musacoder-forkserver").start()

    def log_tail(self, n: int = 1500) -> str:
        return file_tail(self.workdir / "forkserver.log", n)

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(_MAX_MSG)
            except OSError:
                data = b""
            with self._cv:
                if not data:
                    self.alive = False
                    self._cv.notify_all()
                    return
                msg = json.loads(data)
                if "started" in msg:
                    self._started[msg["started"]] = msg
                elif "exit" in msg:
                    self._exits[msg["exit"]] = msg["code"]
                    self._live.discard(msg["exit"])
                self._cv.notify_all()

    def spawn(self, fds: tuple[int, int, int], cwd: Path, env: dict[str, str], timeout_s: float = 60.0) -> ForkedProcess:
        """Fork a worker with these (protocol in, protocol out, log) descriptors; raises ForkServerError when the
        server is gone or does not answer (the caller then starts the worker the plain way)."""
        with self._cv:
            if not self.alive:
                raise ForkServerError("the fork server is not running")
            rid = self._next_id
            self._next_id += 1
        payload = json.dumps({"id": rid, "cwd": str(cwd), "env": env}).encode()
        try:
            with self._send_lock:
                socket.send_fds(self.sock, [payload], list(fds))
        except OSError as e:
            raise ForkServerError(f"the fork server is not reachable: {e}") from None
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while rid not in self._started and self.alive and time.monotonic() < deadline:
                self._cv.wait(max(0.0, deadline - time.monotonic()))
            got = self._started.pop(rid, None)
            if got is not None and "pid" in got:
                self._live.add(got["pid"])
        if got is None and self.alive:  # no answer in time (stopped or stuck): replace it rather than wait again
            self.close()
        if got is None or "pid" not in got:
            raise ForkServerError((got or {}).get("error") or "the fork server did not fork")
        return ForkedProcess(self, got["pid"])

    def busy(self) -> bool:
        """Whether a worker it forked is still running."""
        with self._cv:
            return bool(self._live)

    def exit_code(self, pid: int) -> int | None:
        with self._cv:
            if pid in self._exits:
                return self._exits.pop(pid)
            alive = self.alive
        if alive:
            return None
        # the server is gone, so nobody reports this child's exit: look at it directly
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return -signal.SIGKILL  # gone; its status was lost with the server
        return -signal.SIGKILL if state in ("Z", "X") else None

    def wait_for_exit(self, pid: int, timeout: float) -> None:
        with self._cv:
            if pid not in self._exits and self.alive:
                self._cv.wait(timeout)

    def close(self) -> None:
        self.alive = self.pending = False
        kill_group(self.proc)
        try:
            self.sock.close()
        except OSError:
            pass
        shutil.rmtree(self.workdir, ignore_errors=True)


def server_env(extra_env: dict[str, str]) -> dict[str, str]:
    """The part of a worker's extra environment its fork server is started with (all but `AFTER_FORK_VARS`)."""
    return {k: v for k, v in extra_env.items() if k not in AFTER_FORK_VARS}


class _Registry:
    """One fork server per worker configuration, started on first use; a configuration whose server failed to start
    is not tried again (its workers start the plain way). At most `max_servers` run at once (each holds its imports'
    memory): a new configuration closes the least recently used server that has no worker running."""

    def __init__(self, max_servers: int = 4):
        self._lock = threading.Lock()
        self._servers: dict[tuple, ForkServer | None] = {}  # in order of last use
        self.max_servers = max_servers
        self.errors: list[str] = []
        atexit.register(self.clear)

    @staticmethod
    def enabled() -> bool:
        return os.environ.get("MUSACODER_FORK_SERVER", "1") not in ("0", "false", "no", "off")

    @staticmethod
    def key(extra_env: dict[str, str], isolate_network: bool) -> tuple:
        """Workers whose configurations differ only in what they read after the fork share a server."""
        return tuple(sorted(server_env(extra_env).items())), isolate_network

    def start_early(self, key: tuple, make) -> None:
        """Start the server for `key` now without waiting for it (`make(wait=False)`), unless one is kept for it: the
        first `get` for `key` then waits only for what is left of its start. A server that fails is reported there."""
        if not self.enabled():
            return
        with self._lock:
            if key in self._servers:
                return
            try:
                self._servers[key] = make(wait=False)
            except (ForkServerError, OSError) as e:
                self.errors.append(str(e))
                print(f"musacoder: {e}; workers of this configuration start without it", file=sys.stderr)
                self._servers[key] = None

    def get(self, key: tuple, make) -> ForkServer | None:
        """The server for `key`, started now (`make()`) if none is kept; None where this configuration's server failed
        to start (its workers start the plain way)."""
        if not self.enabled():
            return None
        with self._lock:  # one start per key; other callers wait for it (it costs what one worker start costs)
            if key in self._servers:
                server = self._servers.pop(key)
                self._servers[key] = server  # most recently used last
                if server is not None and server.pending:  # started early: its hello is read now
                    try:
                        server.await_ready()
                    except ForkServerError as e:
                        self.errors.append(str(e))
                        print(f"musacoder: {e}; workers of this configuration start without it", file=sys.stderr)
                        self._servers[key] = None
                        return None
                if server is None or server.alive:
                    return server
                server.close()  # it died: start another
            running = [k for k, s in self._servers.items() if s is not None and (s.alive or s.pending)]
            for k in running[: max(0, len(running) - self.max_servers + 1)]:
                if not self._servers[k].busy():
                    self._servers.pop(k).close()
            try:
                server = make()
            except (ForkServerError, OSError) as e:
                self.errors.append(str(e))
                print(f"musacoder: {e}; workers of this configuration start without it", file=sys.stderr)
                server = None
            self._servers[key] = server
            return server

    def clear(self) -> None:
        with self._lock:
            servers, self._servers = self._servers, {}
        for s in servers.values():
            if s is not None:
                s.close()


FORK_SERVERS = _Registry()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
