"""A candidate worker process, seen from the trusted side.

Each attempt gets a fresh worker (forked by a fork server that has imported torch, or started with `python -m`): its
own process group (killed whole afterwards), a throw-away working directory that is also its HOME and TMPDIR, an
environment scrubbed of everything but toolchain variables (no API keys), no core dumps, a file-size limit, and a
wall-clock deadline on every request. Where the host permits, it also runs in the isolation layers of
`musacoder.judge.isolation`: network, IPC and PID namespaces of its own, a read-only file system but for its folder
and the build cache, private /tmp and /dev, no capabilities, a seccomp filter and resource limits; `Sandbox.layers`
lists those its worker entered. A crash, a hang or a poisoned CUDA context ends only this worker; the caller turns it
into a clean status.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from musacoder.build import broker
from musacoder.judge import forkserver, isolation, messages
from musacoder.judge.forkserver import ForkServerError, file_tail, kill_group, os_kill_group, reap

# `musacoder.judge.protocol` (which imports torch) is imported where a worker is talked to, so that starting a fork
# server (`start_fork_server`) does not wait for torch: the command line starts it before it imports torch itself.

ENV_KEEP_PREFIXES = ("CUDA", "NVIDIA", "TORCH", "TRITON", "LD_LIBRARY_PATH", "PATH", "CC", "CXX", "MAX_JOBS", "OMP_",
                     "MKL_", "OPENBLAS_", "PYTHONPATH", "LANG", "LC_", "MUSACODER_", "NCCL_NVLS_ENABLE", "HIP", "ROCM",
                     "MUSA", "MTHREADS")  # MUSA_HOME, MUSA_VISIBLE_DEVICES, MTHREADS_VISIBLE_DEVICES (torch_musa)


def isolation_prefix() -> tuple[str, ...]:
    """Command prefix that starts the fork server (and so its workers) in network and IPC namespaces of its own
    (`unshare --net --ipc`, as root or through an unprivileged user namespace); empty where neither is permitted."""
    return isolation.server_prefix()


class WorkerTimeout(Exception):
    pass


class WorkerStartFailed(Exception):
    """The worker never became ready (died or failed while starting, before any candidate code reached it): a fault
    of the machine or the harness (e.g. no device memory left for a CUDA context), never of the candidate."""

    def __init__(self, reason: str, log_tail: str = ""):
        super().__init__(reason)
        self.log_tail = log_tail


class WorkerDied(Exception):
    def __init__(self, returncode: int | None, log_tail: str, oom_killed: bool = False):
        super().__init__(f"worker exited with {returncode}")
        self.returncode = returncode
        self.log_tail = log_tail
        self.oom_killed = oom_killed  # by the kernel, at the worker's memory cgroup's cap


def worker_environment(workdir: Path, cache_dir: Path, extra: dict[str, str] | None) -> dict[str, str]:
    """A worker's whole environment: the toolchain variables kept from ours (`ENV_KEEP_PREFIXES`), its folder as HOME
    and TMPDIR, build caches under `cache_dir` (torch's inductor's too: set here, so inductor never sets it in the
    worker, where it would be an environment change after the harness guard's snapshot), the sandbox layers to enter, this package first on the import path,
    then `extra`."""
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_KEEP_PREFIXES)}
    # USER and LOGNAME: a worker may run as a uid without an account (the `uid` layer), where getpass.getuser(),
    # which torch's caches call, would otherwise fail
    # under the build broker the shared cache is read-only to workers, and Triton's and torch's own caches, which
    # the worker writes itself, are its own (a shared one would let a candidate plant a kernel for another's source)
    own = Path(workdir) if broker.enabled() else Path(cache_dir)
    env.update(HOME=str(workdir), TMPDIR=str(workdir), USER="musacoder-worker", LOGNAME="musacoder-worker",
               PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", TORCH_EXTENSIONS_DIR=str(own / "torch_extensions"),
               TRITON_CACHE_DIR=str(own / "triton"), TORCHINDUCTOR_CACHE_DIR=str(own / "inductor"),
               MUSACODER_BUILD_BROKER="1" if broker.enabled() else "0",
               **isolation.worker_env(workdir, cache_dir))
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # OpenMP threads that spin after a parallel region (libgomp's default) take the cores the next call needs: an
    # extension built with -fopenmp beside torch's own pool slowed both sides by tens of times on a 2-core host, and
    # only in the candidate's worker. Idle threads sleep in every worker, the clean reference's too, so both sides
    # are timed under the same conditions (set before the worker starts: libgomp reads it when it loads).
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.update(extra or {})
    return env


class _Started:
    """A worker process started ahead of use: its own workdir, log and pipes; it imports torch while it waits (or is
    forked by `server`, with torch already imported)."""

    def __init__(self, cache_dir: Path, extra_env: dict[str, str], isolate_network: bool, server=None):
        self.workdir = Path(tempfile.mkdtemp(prefix="cand-", dir=isolation.workers_base()))
        self.log_path = self.workdir / "worker.log"
        from musacoder.judge import protocol

        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        for fd in (p2c_w, c2p_w):
            protocol.widen_pipe(fd)
        log = open(self.log_path, "wb")
        env = worker_environment(self.workdir, cache_dir, extra_env)
        try:
            self.proc = None
            if server is not None:
                try:
                    self.proc = server.spawn((p2c_r, c2p_w, log.fileno()), self.workdir, env)
                except ForkServerError:
                    pass  # started the plain way below
            if self.proc is None:
                prefix = list(isolation.worker_prefix()) if isolate_network else []
                self.proc = subprocess.Popen(
                    prefix + [sys.executable, "-m", "musacoder.judge.worker", str(p2c_r), str(c2p_w)],
                    cwd=self.workdir, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    pass_fds=(p2c_r, c2p_w), start_new_session=True,
                )
        finally:
            log.close()
            os.close(p2c_r)
            os.close(c2p_w)
        self.to_worker, self.from_worker = p2c_w, c2p_r

    def discard(self) -> None:
        kill_group(self.proc)
        isolation.release_cgroups(isolation.read_report(self.workdir).get("cgroups"))
        for fd in (self.to_worker, self.from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.workdir, ignore_errors=True)


class Prestart:
    """Idle workers started ahead, per worker configuration, so a verification does not wait for Python and torch to
    start. Each worker still serves exactly one verification: a fresh process per candidate, only started earlier.
    Nothing runs in an idle worker but the harness; idle workers are killed at exit."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle: dict[tuple, list[_Started]] = {}
        self._starting = 0  # workers being started ahead right now (counted against the target)
        self._released = 0  # bumped by each `release`: a later batch or release cancels an earlier linger
        self.target = 0
        atexit.register(self.clear)

    def take(self, key: tuple, start) -> _Started:
        """An idle worker for `key`, or one started now. The idle set is topped up afterwards, by `refill`, once the
        caller's own worker is ready: at the start of a batch every verification needs a worker at once, and CUDA
        contexts made at the same moment slow each other down (docs/benchmarks.md), so the workers needed now are not
        made to share that start with the ones for later."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            while idle:
                w = idle.pop(0)
                if w.proc.poll() is None:
                    return w
                w.discard()
        return start()

    def refill(self, key: tuple, start) -> None:
        """Start idle workers for `key` up to `target`. Idle workers and those still being started are counted
        together, so callers arriving at once never start more than `target` ahead (counted apart, concurrent callers
        each started nearly `target`, and the idle CUDA contexts filled a GPU)."""
        with self._lock:
            idle = self._idle.setdefault(key, [])
            total = sum(len(ws) for ws in self._idle.values()) + self._starting
            want = max(0, min(self.target - len(idle), self.target - total))
            self._starting += want
        for _ in range(want):
            w = None
            try:
                w = start()
            except Exception:  # noqa: BLE001 - a worker started ahead is no caller's business; a later take starts one
                pass
            finally:
                with self._lock:
                    self._starting -= 1
                    keep = w is not None and self.target > 0
                    if keep:
                        self._idle.setdefault(key, []).append(w)
                if w is not None and not keep:  # the batch ended meanwhile
                    w.discard()

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(ws) for ws in self._idle.values())

    def release(self, linger_s: float) -> None:
        """The batch ended: kill the idle workers after `linger_s` seconds unless a batch is running by then (an RL
        run verifies one batch per step, and the next step's first verifications then find ready workers instead of
        making every CUDA context at once). Idle workers hold a CUDA context each while they linger; nothing
        ever ran in them, and each still serves one verification only."""
        with self._lock:
            self._released += 1
            mine = self._released
        if linger_s <= 0:
            self.clear()
            return

        def expire():
            with self._lock:
                stale = self.target == 0 and self._released == mine
            if stale:
                self.clear()

        t = threading.Timer(linger_s, expire)
        t.daemon = True
        t.start()

    def clear(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for ws in idle.values():
            for w in ws:
                w.discard()


PRESTART = Prestart()


PRESTART_LINGER_S = float(os.environ.get("MUSACODER_PRESTART_LINGER_S", "30"))


@contextlib.contextmanager
def prestarted_workers(n: int, linger_s: float | None = None):
    """Keep up to `n` idle workers started ahead while the block runs (the batch pool uses its worker count); the
    idle ones are kept `linger_s` seconds more (default `PRESTART_LINGER_S`, env `MUSACODER_PRESTART_LINGER_S`) for
    the next batch, then killed (at once with 0, and always at exit)."""
    old = PRESTART.target
    PRESTART.target = max(old, n)
    try:
        yield
    finally:
        PRESTART.target = old
        if old == 0:
            PRESTART.release(PRESTART_LINGER_S if linger_s is None else linger_s)


def _server_maker(cache_dir: Path, extra_env: dict[str, str], isolate_network: bool, start_timeout_s: float):
    """What starts the fork server of this worker configuration (`make(wait=...)` for `forkserver.FORK_SERVERS`)."""

    def make(wait: bool = True) -> forkserver.ForkServer:
        workdir = Path(tempfile.mkdtemp(prefix="forkserver-", dir=isolation.workers_base()))
        prefix = list(isolation_prefix()) if isolate_network else []
        env = worker_environment(workdir, cache_dir, forkserver.server_env(extra_env))
        return forkserver.ForkServer(env, workdir, prefix, start_timeout_s, wait=wait)

    return make


KEY_WORKDIR = Path("/musacoder-forkserver-workdir")  # stands for a kept server's own folder in its key


def _kept_server_maker(cache_dir: Path, extra_env: dict[str, str], isolate_network: bool, start_timeout_s: float):
    """Like `_server_maker`, but the server is kept after this process (`forkserver.attach_kept`): connect to the one
    kept for this worker configuration, or start it. Where no private folder can hold its socket, a server for this
    process only."""
    plain = _server_maker(cache_dir, extra_env, isolate_network, start_timeout_s)

    def make(wait: bool = True) -> forkserver.ForkServer:
        prefix = list(isolation_prefix()) if isolate_network else []
        try:
            folder = forkserver.private_folder(isolation.workers_base())
        except OSError as e:
            print(f"musacoder: the fork server is not kept ({e})", file=sys.stderr)
            return plain(wait)
        key_env = worker_environment(KEY_WORKDIR, cache_dir, forkserver.server_env(extra_env))
        path = folder / f"{forkserver.kept_name(key_env, prefix, isolate_network)}.sock"
        server = forkserver.attach_kept(path, start_timeout_s)
        if server is None:
            workdir = Path(tempfile.mkdtemp(prefix="forkserver-", dir=isolation.workers_base()))
            env = worker_environment(workdir, cache_dir, forkserver.server_env(extra_env))
            server = forkserver.ForkServer(env, workdir, prefix, start_timeout_s, wait=False, listen=path,
                                           idle_s=forkserver.idle_seconds())
        if wait:
            server.await_ready()
        return server

    return make


def start_fork_server(cache_dir: Path, env: dict[str, str] | None = None, isolate_network: bool = True,
                      start_timeout_s: float = 180.0, keep: bool = False) -> None:
    """Start, without waiting for it, the fork server that a `Sandbox(cache_dir, env=env, isolate_network=...)` will
    fork its worker from, so that its imports (Python, torch, the harness) run while the caller does its own work
    (`musacoder verify` imports torch and runs the static checks meanwhile). The server is the one the sandbox would
    start itself, with the same environment and layers; nothing of a candidate's reaches it. Does nothing where fork
    servers are off or one is kept for this configuration. With `keep` (`musacoder verify`), the server outlives this
    process, and the next process that asks for the same configuration connects to it instead of starting one
    (`_kept_server_maker`; docs/architecture.md)."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    env = dict(env or {})
    servers = forkserver.FORK_SERVERS
    maker = _kept_server_maker if keep else _server_maker
    servers.start_early(servers.key(env, isolate_network), maker(cache_dir, env, isolate_network, start_timeout_s))


class Sandbox:
    """Context manager around one worker process. With `use_prestarted` (the default) the worker is forked by the
    configuration's fork server (`musacoder.judge.forkserver`) and, for GPU verifications in a batch, may have been
    started ahead; without it, a plain `python -m musacoder.judge.worker` process (the retry after a start failure)."""

    def __init__(self, cache_dir: Path, env: dict[str, str] | None = None, keep_workdir: bool = False,
                 memory_limit_gb: float | None = None, isolate_network: bool = True, use_prestarted: bool = True,
                 start_timeout_s: float = 180.0):
        self.isolate_network = isolate_network
        self.use_prestarted = use_prestarted
        self.start_timeout_s = start_timeout_s
        self.cache_dir = Path(cache_dir)
        self.keep = keep_workdir
        self.extra_env = dict(env or {})
        if memory_limit_gb:
            self.extra_env["MUSACODER_AS_LIMIT"] = str(int(memory_limit_gb * (1 << 30)))
        self.proc: subprocess.Popen | None = None
        self.ready_wait_s = 0.0  # seconds __enter__ waited for a ready worker
        self.stop_s = 0.0  # seconds close() took
        # with `reap_later` set before the block ends, close() kills the worker and returns; its reaping (the exit,
        # the cgroups emptied and removed, the folder) finishes in a thread of its own, and `gone` is set then
        self.reap_later = False
        self.gone = threading.Event()
        self.start_report: dict[str, float] = {}  # the worker's own start, part by part (seconds; it says so itself)
        self.layers: list[str] = []  # the isolation layers the worker entered (`musacoder.judge.isolation`)
        self._cgroups: list[str] = []
        self._said_ready = False
        self.served_keys: list[str] = []  # the builds the broker answered for this worker (`request`)

    def __enter__(self) -> "Sandbox":
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        key = (str(self.cache_dir), tuple(sorted(self.extra_env.items())), self.isolate_network)
        t0 = time.monotonic()  # `ready_wait_s` counts the fork server's start too, where this call waits for it

        server = None
        if self.use_prestarted:
            servers = forkserver.FORK_SERVERS
            # the cache folder, the GPU and the memory limit only matter to a worker's own environment (sent with each
            # fork), not to the imports
            server = servers.get(servers.key(self.extra_env, self.isolate_network),
                                 _server_maker(self.cache_dir, self.extra_env, self.isolate_network,
                                               self.start_timeout_s))

        def start() -> _Started:
            return _Started(self.cache_dir, self.extra_env, self.isolate_network, server)

        # Only GPU verifications use workers started ahead: there the CPU has room while the GPU stages run. For CPU
        # verifications the extra starts compete with the work itself (lower throughput, docs/benchmarks.md).
        ahead = self.use_prestarted and PRESTART.target and "MUSACODER_PREWARM_DEVICE" in self.extra_env
        w = PRESTART.take(key, start) if ahead else start()
        self.workdir, self.log_path, self.proc = w.workdir, w.log_path, w.proc
        self.to_worker, self.from_worker = w.to_worker, w.from_worker
        try:
            self._await_ready()
        except BaseException:
            self.close()
            raise
        self.ready_wait_s = time.monotonic() - t0
        if ahead:
            PRESTART.refill(key, start)
        return self

    def _await_ready(self) -> None:
        """The worker's first message says it started (Python, torch, its CUDA context where asked for); anything
        else, or nothing, is a start failure."""
        try:
            hello = self._reply(self.start_timeout_s, "start")
        except (WorkerDied, WorkerTimeout) as e:
            raise WorkerStartFailed(f"the worker did not start: {e}", self.log_tail()) from None
        if not hello.get("ready"):
            raise WorkerStartFailed(f"the worker failed while starting: {str(hello.get('error', hello))[-1500:]}",
                                    self.log_tail())
        report = hello.get("start_s")
        self.start_report = {str(k): float(x) for k, x in report.items()} if isinstance(report, dict) else {}
        # written by the worker before it said ready, so before any candidate code existed in it
        entered = isolation.read_report(self.workdir)
        self._said_ready = True
        self._cgroups = list(entered.get("cgroups") or [])
        prefix = isolation.server_prefix() if isinstance(self.proc, forkserver.ForkedProcess) else \
            isolation.worker_prefix()
        self.layers = (isolation.prefix_layers(prefix) if self.isolate_network else []) + \
            [str(x) for x in entered.get("layers", [])]

    def request(self, msg: messages.Request | dict, timeout_s: float) -> dict:
        """Send one request (a `musacoder.judge.messages` record, or its wire dict) and wait for its reply, at most
        `timeout_s` seconds (the builds it asks for included)."""
        from musacoder.judge import protocol

        assert self.proc is not None
        msg = msg.to_wire() if isinstance(msg, messages.Request) else dict(msg)
        deadline = time.monotonic() + timeout_s
        key = secrets.randbits(62)  # each reply must carry it: a message written by candidate code cannot know it
        try:
            protocol.send(self.to_worker, {**msg, protocol.REPLY_KEY: key})
        except (BrokenPipeError, OSError):
            raise self._died() from None
        reply = self._reply(timeout_s, msg.get("op"), key)
        cache_dir = msg.get("cache_dir") or self.cache_dir
        builds = 0
        while isinstance(reply, dict) and "build_request" in reply:  # its candidate's load_inline: the broker
            builds += 1
            try:
                if builds > broker.MAX_BUILDS_PER_REQUEST:
                    raise broker.BuildRequestError(f"more than {broker.MAX_BUILDS_PER_REQUEST} builds in one request")
                answer = broker.serve(reply["build_request"], cache_dir, self.build_in_builder, deadline,
                                      env={**os.environ, **self.extra_env})
                if answer.get("ok") and answer.get("key"):
                    self.served_keys.append(answer["key"])
            except broker.BuildRequestError as e:
                answer = {"key": None, "ok": False, "log": str(e)}
            except broker.BuildDeadline as e:
                raise WorkerTimeout(str(e)) from None
            try:
                protocol.send(self.to_worker, answer)
            except (BrokenPipeError, OSError):
                raise self._died() from None
            reply = self._reply(max(0.0, deadline - time.monotonic()), msg.get("op"), key)
        if msg.get("op") == "load" and not broker.enabled() and isinstance(reply, dict) \
                and isinstance(reply.get("builds"), list):
            # it built into the cache itself (no broker): what it built is sealed before its candidate runs on, so
            # no worker uid changes a finished cache entry
            isolation.seal_builds(cache_dir,
                                  [b.get("key") for b in reply["builds"] if isinstance(b, dict)], self.layers,
                                  isolation.worker_uid(str(self.workdir)))
        return reply

    def build_in_builder(self, msg: messages.BuildRequest | dict, timeout_s: float, installer) -> dict:
        """Run one `op_build` request in a fresh worker of this one's configuration (no device warmed ahead), and
        hand its `stage` folder to `installer(stage, reply)` while that worker's folder still exists. A builder that
        does not start, dies or runs past the deadline raises as the candidate's own worker would (`WorkerStartFailed`
        is the verifier's fault and retried; a build that outlasts the deadline is a timeout), never a compile
        error."""
        env = {k: v for k, v in self.extra_env.items() if k != "MUSACODER_PREWARM_DEVICE"}
        with Sandbox(self.cache_dir, env=env, isolate_network=self.isolate_network,
                     start_timeout_s=self.start_timeout_s) as builder:
            reply = builder.request(msg, timeout_s)
            if reply.get("ok"):
                installer(builder.workdir / "stage", reply)
            return reply

    def _reply(self, timeout_s: float, op, key: int | None = None) -> dict:
        """The worker's next message; with `key`, it must carry the key its request was sent with
        (`protocol.REPLY_KEY`)."""
        from musacoder.judge import protocol

        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimeout(f"no reply to {op!r} within {timeout_s:.0f} s")
            ready, _, _ = select.select([self.from_worker], [], [], min(left, 1.0))
            if ready:
                break
            if self.proc.poll() is not None:
                # it may have written its reply just before exiting
                ready, _, _ = select.select([self.from_worker], [], [], 0)
                if not ready:
                    raise self._died()
                break
        try:
            reply = protocol.recv(self.from_worker, deadline)
        except protocol.ChannelTimeout:  # a reply begun and never finished must not hang the trusted side
            raise WorkerTimeout(f"reply to {op!r} not finished within {timeout_s:.0f} s") from None
        except protocol.ChannelClosed:
            self.proc.wait(timeout=5)
            raise self._died() from None
        except Exception as e:  # noqa: BLE001 - an unreadable (e.g. forged) reply
            raise WorkerDied(self.proc.poll(), f"unreadable reply from the worker: {e}") from None
        if not isinstance(reply, dict):
            raise WorkerDied(self.proc.poll(), "malformed reply from the worker")
        if key is not None and reply.pop(protocol.REPLY_KEY, None) != key:
            raise WorkerDied(self.proc.poll(), f"a reply to {op!r} without its request's key: written by code in the "
                                               "worker, not by the verifier's harness")
        return reply

    def log_tail(self, n: int = 3000) -> str:
        return file_tail(self.log_path, n)

    def _died(self) -> WorkerDied:
        """The worker is gone: its exit and last output, and whether the kernel killed it at its memory limit."""
        tail, oom = self.log_tail(), bool(isolation.oom_kills(self._cgroups))
        if oom:
            tail += (f"\nThe kernel killed the worker: it went over its host memory limit of "
                     f"{isolation.worker_memory_mb()} MB (MUSACODER_WORKER_MEMORY_MB).")
        return WorkerDied(self.proc.poll() if self.proc is not None else None, tail, oom)

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Kill the worker's process group, close the pipes, reap it and release its cgroups; the seconds it took in
        `stop_s`. With `reap_later`, the reaping (a GPU worker's teardown: its context and device memory going back)
        runs in a thread and `gone` is set when it is done; otherwise `gone` is set before this returns."""
        t0 = time.monotonic()
        try:
            proc, cgroups = self._kill()
            if self.reap_later and proc is not None:
                threading.Thread(target=self._reap, args=(proc, cgroups), name="musacoder-reaper").start()
            else:
                self._reap(proc, cgroups)
        finally:
            self.stop_s += time.monotonic() - t0

    def _kill(self):
        """SIGKILL to the worker's group and the pipes closed: after this nothing of it runs (it may still be
        exiting); returns what reaping it needs."""
        proc, cgroups = self.proc, list(self._cgroups)
        if proc is not None:
            os_kill_group(proc)
            if not self._said_ready:  # no candidate code ran in it, so the report is the worker's own
                cgroups = list(isolation.read_report(self.workdir).get("cgroups") or [])
            self.proc = None
        for fd in (getattr(self, "to_worker", None), getattr(self, "from_worker", None)):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.to_worker = self.from_worker = None
        return proc, cgroups

    def _reap(self, proc, cgroups) -> None:
        """Wait for the killed worker to exit, then release its cgroups (the kernel removes a cgroup only once every
        task in it is gone: a thousand forked children take seconds) and remove its folder; sets `gone`."""
        try:
            if proc is not None:
                reap(proc)
                isolation.release_cgroups(cgroups)
            if not self.keep and getattr(self, "workdir", None):
                shutil.rmtree(self.workdir, ignore_errors=True)
        finally:
            self.gone.set()
