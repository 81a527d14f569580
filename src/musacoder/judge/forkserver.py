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

A kept server (`musacoder verify`'s, through `sandbox.start_fork_server(keep=True)`) also outlives the process that
started it, so the next `musacoder verify` finds it ready. It listens on a Unix socket in a folder of this user's only
(`<workers' base>/forkservers/`, mode 0700, which workers see empty), named by a digest of everything that decides
how its workers are made (`kept_name`); it serves only clients the kernel says run as its user (`SO_PEERCRED`), and a
client connects only to the process its pid file names, a fork server of its user (`attach_kept`). Each client's
workers are reported to that client only; a client that goes has its workers killed and their folders removed, and
the server serves on. It exits after `MUSACODER_FORK_SERVER_IDLE_S` seconds with no client and no worker (sooner once
its package or torch changed on disk), removing its socket, pid file and folder; `MUSACODER_FORK_SERVER_KEEP=0` turns
keeping off.
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
STALE_LOOK_S = 20.0  # how often an idle kept server checks that its package and torch are still those on disk
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


def serve(fd: int, listen: str | None = None, idle_s: float = 600.0) -> None:
    """Serve the trusted process on `fd`; with `listen` (a kept server, see `KeptServer`), also accept other trusted
    processes of this user on a Unix socket at that path, and exit once `idle_s` seconds pass with no client and no
    worker."""
    state = _State()
    try:
        _serve(socket.socket(fileno=fd), state, listen, idle_s)
    except OSError:  # a reply the trusted process, gone, could not take (a server for one process only)
        _abandon(state.folders)
    finally:
        state.cleanup()


class _State:
    """The server's bookkeeping: each live worker's folder and client, the clients, the kept server's files."""

    def __init__(self):
        self.folders: dict[int, str] = {}  # each live worker's folder
        self.owner: dict[int, socket.socket] = {}  # each live worker's client
        self.clients: set[socket.socket] = set()
        self.orphans: set[int] = set()  # workers whose client went: killed, their folders removed once reaped
        self.files: list[tuple[str, int]] = []  # (path, inode) of the kept server's socket and pid file
        self.lock_fd: int | None = None
        self.pid_namespaces = True  # until making one fails
        self.in_made_ns = False  # whether children are now forked into a namespace the server made

    def cleanup(self) -> None:
        """A kept server removes its socket and pid file (if they are still its own) and its folder when it exits."""
        if self.lock_fd is None:
            return
        for pid in self.owner:  # stopped (SIGTERM) while workers ran: nobody will read their verdicts
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for path, ino in reversed(self.files):  # the socket first, the lock file last (removed while still held)
            try:
                if os.lstat(path).st_ino == ino:
                    os.unlink(path)
            except OSError:
                pass
        _remove_own_folder(os.getcwd(), "forkserver-")


def _remove_own_folder(folder: str, prefix) -> None:
    name, parent = os.path.basename(folder), os.path.basename(os.path.dirname(folder))
    if name.startswith(prefix) and parent.startswith("musacoder-"):  # only folders made for us
        shutil.rmtree(folder, ignore_errors=True)


def _listen(path: str, state: _State) -> socket.socket | None:
    """Become the kept server at `path`: hold its lock (`path`.lock, released by the kernel when this process dies,
    however it dies), write the pid file the clients check, bind and listen. None where another live server holds
    the lock (this one then serves its starter only, as a server for one process does)."""
    import fcntl

    folder = os.path.dirname(path)
    st = os.lstat(folder)
    if not stat_private_dir(st):
        raise OSError(f"{folder} is not a folder of this user's only")
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino != os.lstat(path + ".lock").st_ino:  # removed by a server exiting meanwhile
            raise BlockingIOError
    except OSError:
        os.close(fd)
        return None
    state.lock_fd = fd
    state.files.append((path + ".lock", os.fstat(fd).st_ino))
    tmp = f"{path}.pid.{os.getpid()}"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "w") as f:
        f.write(str(os.getpid()))
    os.replace(tmp, path + ".pid")
    state.files.append((path + ".pid", os.lstat(path + ".pid").st_ino))
    try:
        os.unlink(path)  # a server that died without removing it
    except FileNotFoundError:
        pass
    lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    lsock.set_inheritable(False)
    old = os.umask(0o177)
    try:
        lsock.bind(path)
    finally:
        os.umask(old)
    state.files.append((path, os.lstat(path).st_ino))
    lsock.listen(16)
    return lsock


def stat_private_dir(st: os.stat_result) -> bool:
    """Whether `st` (an lstat) is a real folder owned by this user that nobody else may enter."""
    import stat as stat_mod

    return stat_mod.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def peer_cred(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket, as the kernel says."""
    import struct

    return struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))


def _drop(state: _State, conn: socket.socket) -> None:
    """A client is gone: nobody will read its workers' verdicts. Kill them (their process groups; the sweep takes
    what they left) and remove their folders once they are reaped."""
    state.clients.discard(conn)
    try:
        conn.close()
    except OSError:
        pass
    for pid, owner in list(state.owner.items()):
        if owner is conn:
            state.orphans.add(pid)
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _tell(state: _State, conn: socket.socket, msg: dict, kept: bool) -> None:
    """Send `msg` to `conn`; a kept server drops a client that cannot take it (a server for one process raises)."""
    try:
        _send(conn, msg)
    except OSError:
        if not kept:
            raise
        _drop(state, conn)


def _serve(sock: socket.socket, state: _State, listen: str | None = None, idle_s: float = 600.0) -> None:
    """Preload, say hello on `sock`, then serve: reap workers and tell their clients, fork a worker per request,
    until the trusted process is gone (an unkept server), or after `idle_s` idle, or once the installed package or
    torch changed on disk (a kept one)."""
    try:
        from musacoder.judge.worker.setup import drop_writable_import_paths

        drop_writable_import_paths()  # its own folder (`python -m` put it first): the forked workers inherit the path
        _preload()
    except BaseException as e:  # noqa: BLE001
        _send(sock, {"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    from musacoder.judge.isolation.libc import prctl

    subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0
    lsock = None
    if listen:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so its files go with it
        try:
            lsock = _listen(listen, state)
        except OSError as e:
            print(f"musacoder fork server: not kept, cannot listen at {listen}: {e}", file=sys.stderr)
    hello = {"ready": True, "pid": os.getpid(), "workdir": os.getcwd(), "kept": lsock is not None}
    _send(sock, hello)
    kept = lsock is not None
    state.clients.add(sock)

    last_sweep = 0.0
    idle_since = time.monotonic()
    # a kept server whose package or torch changed on disk is never found again (its name holds both): it goes at
    # its next idle moment rather than after its whole idle time
    installed = (_package_digest(), _torch_stamp()) if kept else None
    last_look = time.monotonic()
    while True:
        if _reap(state, kept):
            last_sweep = 0.0  # what a reaped worker left behind is adopted now
        if subreaper and time.monotonic() - last_sweep >= SWEEP_S:
            _sweep(set(state.owner))
            last_sweep = time.monotonic()
        if not kept and not state.clients:  # the trusted process is gone
            return _abandon(state.folders)
        if state.clients or state.owner:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= idle_s:
            return
        elif kept and time.monotonic() - last_look >= STALE_LOOK_S:
            last_look = time.monotonic()
            if (_package_digest(), _torch_stamp()) != installed:
                return
        ready, _, _ = select.select([*state.clients, *([lsock] if lsock else [])], [], [], 0.05)
        for conn in ready:
            if conn is lsock:
                _accept(state, lsock, hello)
            else:
                _serve_request(state, conn, lsock, kept)


def _reap(state: _State, kept: bool) -> bool:
    """Reap every exited child and report its worker's exit to its client (as Popen.returncode: -N for signal N);
    an orphan's folder is removed. Whether a worker was reaped."""
    reaped = False
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        if pid not in state.owner:
            continue
        reaped = True
        conn = state.owner.pop(pid)
        folder = state.folders.pop(pid, None)
        if pid in state.orphans:
            state.orphans.discard(pid)
            if folder:
                _remove_own_folder(folder, "cand-")
        elif conn in state.clients:
            _tell(state, conn, {"exit": pid, "code": os.waitstatus_to_exitcode(status)}, kept)


def _serve_request(state: _State, conn: socket.socket, lsock: socket.socket | None, kept: bool) -> None:
    """Read one request from client `conn` (its JSON and three fds: the worker's stdin, stdout, stderr) and fork
    its worker; a client that went, or sent something malformed, is dropped."""
    try:
        data, fds, _, _ = socket.recv_fds(conn, _MAX_MSG, 3)
    except OSError:
        data, fds = b"", []
    if not data:  # this client is gone
        for f in fds:
            os.close(f)
        _drop(state, conn)
        return
    try:
        req = json.loads(data)
        assert isinstance(req, dict) and len(fds) == 3 and isinstance(req.get("cwd"), str) \
            and isinstance(req.get("env"), dict) and "id" in req
    except (ValueError, AssertionError):
        for f in fds:
            os.close(f)
        _drop(state, conn)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    _pid_namespace_for(state, req)
    try:
        pid = os.fork()
    except OSError as e:
        for f in fds:
            os.close(f)
        _tell(state, conn, {"started": req["id"], "error": str(e)}, kept)
        return
    if pid == 0:
        for c in state.clients:
            c.close()
        if lsock is not None:
            lsock.close()
        _child(req, fds)
    state.owner[pid] = conn
    state.folders[pid] = req["cwd"]
    for f in fds:
        os.close(f)
    _tell(state, conn, {"started": req["id"], "pid": pid}, kept)


def _pid_namespace_for(state: _State, req: dict) -> None:
    """Before forking `req`'s worker: a fresh PID namespace for it where its layers ask for one, or back out of the
    one the server made for an earlier worker; given up for good once making one fails."""
    from musacoder.judge import isolation

    wants = "pid" in str((req.get("env") or {}).get("MUSACODER_SANDBOX", "")).split(",")  # the worker's layers
    if state.pid_namespaces and (wants or state.in_made_ns):
        try:
            isolation.new_pid_namespace_for_next_child(fresh=wants)
            state.in_made_ns = wants
        except OSError as e:
            print(f"musacoder fork server: no PID namespaces for workers: {e}", file=sys.stderr)
            state.pid_namespaces = False


def _accept(state: _State, lsock: socket.socket, hello: dict) -> None:
    """A new client of the kept server: served only if the kernel says it runs as this server's user."""
    try:
        conn, _ = lsock.accept()
    except OSError:
        return
    conn.set_inheritable(False)
    try:
        _, uid, _ = peer_cred(conn)
        if uid != os.getuid():
            raise PermissionError(f"a client of uid {uid}")
        _send(conn, hello)
    except OSError as e:
        print(f"musacoder fork server: refused a client: {e}", file=sys.stderr)
        conn.close()
        return
    state.clients.add(conn)


# --------------------------------------------------------------------------------------------------------------------
# The trusted side
class ForkServerError(RuntimeError):
    pass


def kill_group(proc) -> None:
    """SIGKILL the process group `proc` leads (it was started in a session of its own) and reap `proc` (a `Popen` or
    a `ForkedProcess`), waiting at most 10 s."""
    os_kill_group(proc)
    reap(proc)


def os_kill_group(proc) -> None:
    """SIGKILL the process group `proc` leads, without waiting for it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reap(proc) -> None:
    """Wait (at most 10 s) for a killed `proc` to exit and collect its status."""
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
    """One running fork server (see the module's docstring) and the reader of its reports: one this process started
    (for itself, or to be kept with `listen`), or a kept one it connected to (`attach`)."""

    def __init__(self, env: dict[str, str], workdir: Path, prefix: list[str], start_timeout_s: float = 180.0,
                 wait: bool = True, listen: Path | None = None, idle_s: float = 600.0):
        """Start the server; with `wait` (the default) also wait for it to say it is ready, else leave that to
        `await_ready` (so its imports run while the caller does other work). With `listen`, the server is kept after
        this process (`KeptServer`): it also listens at that path and exits after `idle_s` seconds without work."""
        self.workdir, self.path = workdir, listen
        self._deadline = time.monotonic() + start_timeout_s
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log = open(workdir / "forkserver.log", "wb")
        extra = [str(listen), str(idle_s)] if listen is not None else []
        try:
            self.proc = subprocess.Popen(
                prefix + [sys.executable, "-m", "musacoder.judge.forkserver", str(theirs.fileno()), *extra],
                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(theirs.fileno(),),
                start_new_session=True)
        finally:
            log.close()
            theirs.close()
        self._setup(ours, None)
        if wait:
            self.await_ready()

    @classmethod
    def attach(cls, sock: socket.socket, pid: int, start_timeout_s: float = 30.0, path: Path | None = None) \
            -> "ForkServer":
        """A kept server this process did not start, on a connected socket (to `path`) whose peer the caller checked
        is `pid`."""
        self = cls.__new__(cls)
        self.workdir, self.proc, self.path = None, None, path
        self._deadline = time.monotonic() + start_timeout_s
        self._setup(sock, pid)
        return self

    def _setup(self, sock: socket.socket, pid: int) -> None:
        self.sock = sock
        self.pid = pid  # the server's (from its hello where this process started it)
        self.kept = False  # whether it outlives this process (its hello says)
        self._cv = threading.Condition()
        self._send_lock = threading.Lock()
        self._started: dict[int, dict] = {}
        self._exits: dict[int, int] = {}
        self._live: set[int] = set()
        self._next_id = 0
        self.alive = False
        self.pending = True  # started, its hello not read yet

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
        if not isinstance(hello, dict) or not hello.get("ready") or self.pid not in (None, hello.get("pid")):
            error = hello.get("error") if isinstance(hello, dict) else None
            if isinstance(hello, dict) and hello.get("ready"):
                error = f"it says it is pid {hello.get('pid')}, not {self.pid}"
            self.close(kill=self.proc is not None)
            raise ForkServerError(f"the fork server did not start: {error or 'no reply'}; log: {self.log_tail()}")
        self.kept = bool(hello.get("kept"))
        self.pid = hello.get("pid")
        if self.workdir is None and isinstance(hello.get("workdir"), str):
            self.workdir = Path(hello["workdir"])  # only to read its log
        self.alive = True
        threading.Thread(target=self._read, daemon=True, name="musacoder-forkserver").start()

    def log_tail(self, n: int = 1500) -> str:
        return file_tail(self.workdir / "forkserver.log", n) if self.workdir is not None else ""

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
            self.close(kill=True)
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

    def close(self, kill: bool | None = None) -> None:
        """Stop using the server. A server for this process only is killed and its folder removed; a kept one
        (`kill` False, the default for it) is only disconnected from, and kills what it forked for this process."""
        self.alive = self.pending = False
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # the reader thread's recv holds the socket open past close()
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        if kill is None:
            kill = not self.kept
        if not kill:
            return
        if self.proc is not None:
            kill_group(self.proc)
        elif isinstance(self.pid, int):
            try:
                os.killpg(self.pid, signal.SIGKILL)  # it leads a session of its own
            except (ProcessLookupError, PermissionError):
                pass
        if self.workdir is not None and self.workdir.name.startswith("forkserver-") and \
                self.workdir.parent.name.startswith("musacoder-"):
            shutil.rmtree(self.workdir, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------------------
# Kept servers: one that outlives the command line call that started it
KEEP_ENV, IDLE_ENV = "MUSACODER_FORK_SERVER_KEEP", "MUSACODER_FORK_SERVER_IDLE_S"
DEFAULT_IDLE_S = 600.0


def keep_wanted() -> bool:
    """Whether `musacoder verify` keeps its fork server for the next call: `MUSACODER_FORK_SERVER_KEEP` (0 or 1), by
    default yes, except under a test runner (pytest sets `PYTEST_CURRENT_TEST`, which the commands a test starts
    inherit), whose tests must not leave servers behind unless they ask for them."""
    got = os.environ.get(KEEP_ENV, "").strip().lower()
    if got:
        return got not in ("0", "false", "no", "off")
    return "PYTEST_CURRENT_TEST" not in os.environ


def idle_seconds() -> float:
    try:
        return max(1.0, float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S)))
    except ValueError:
        return DEFAULT_IDLE_S


def private_folder(base: Path) -> Path:
    """`base`/forkservers, made if missing; raises OSError unless it and `base` are real folders owned by this user
    that nobody else may enter (a socket anyone else could replace would hand a worker's pipes to them)."""
    folder = base / "forkservers"
    folder.mkdir(mode=0o700, exist_ok=True)
    for f in (base, folder):
        if not stat_private_dir(os.lstat(f)):
            raise OSError(f"{f} is not a folder of this user's only")
    return folder


def _package_digest() -> str:
    """A digest of the musacoder package's files (contents and names): an upgraded or edited package never reuses a
    server that imported the old one."""
    import hashlib

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            h.update(os.path.relpath(path, root).encode() + b"\0")
            try:
                with open(path, "rb") as f:
                    h.update(f.read())
            except OSError:
                h.update(b"?")
    return h.hexdigest()


def _torch_stamp() -> list:
    """Where torch is installed and when its files last changed (found without importing it)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.origin:
        return []
    folder = Path(spec.origin).parent
    out = [str(folder)]
    for name in ("__init__.py", "version.py"):
        try:
            st = os.stat(folder / name)
            out += [name, st.st_size, st.st_mtime_ns]
        except OSError:
            pass
    return out


def kept_name(server_environment: dict[str, str], prefix: list[str], isolate_network: bool) -> str:
    """The name of the kept server for a worker configuration: a digest of everything that decides how its workers
    are made (its environment, its namespaces, this Python, the musacoder package's files, torch's install)."""
    import hashlib

    exe = os.path.realpath(sys.executable)
    key = {"env": sorted(server_environment.items()), "prefix": list(prefix), "isolate_network": isolate_network,
           "python": [exe, sys.version], "package": _package_digest(), "torch": _torch_stamp()}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def attach_kept(path: Path, start_timeout_s: float = 30.0) -> ForkServer | None:
    """Connect to the kept server at `path` if one runs there and is who it should be: the kernel must say the
    listener runs as this user and is the process its pid file (in the same private folder) names, a musacoder fork
    server. None otherwise (the caller starts one)."""
    try:
        expected = int(Path(f"{path}.pid").read_text().strip())
    except (OSError, ValueError):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.settimeout(2.0)
        sock.connect(str(path))
        sock.settimeout(None)
        pid, uid, _ = peer_cred(sock)
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if uid != os.getuid() or pid != expected or b"musacoder.judge.forkserver" not in cmdline:
            raise PermissionError(f"the listener at {path} is pid {pid} of uid {uid}, not the kept server")
    except OSError:
        sock.close()
        return None
    return ForkServer.attach(sock, pid, start_timeout_s, path)


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
    serve(int(sys.argv[1]), *([sys.argv[2], float(sys.argv[3])] if len(sys.argv) > 3 else []))
