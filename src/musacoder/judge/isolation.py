"""Isolation layers of a candidate worker: namespaces, a read-only file system, dropped capabilities, a seccomp filter
and resource limits.

A worker enters them itself, at the very start of `worker.main` and before any candidate code exists, through
`enter_worker()`; what it must enter before it exists (a network and an IPC namespace, through the `unshare` prefix of
its fork server or of its own `python -m` start, and a PID namespace, made by the fork server just before the fork)
is arranged by the trusted side. Each layer is used where the host permits it and skipped otherwise; the worker writes
the layers it entered to `REPORT` in its folder before saying `ready`, and the trusted side reads that file then
(nothing of the candidate has run yet, so the file is the worker's own).

The layers (names as reported in a verdict's `sandbox` field):
- `net`, `ipc`: namespaces of their own from the `unshare` prefix: no network at all, no shared System V IPC.
- `pid`: the worker is PID 1 of a PID namespace of its own. It sees only its own descendants in a `/proc` of its own,
  cannot see or signal the verifier, the fork server or other workers, and when it dies the kernel kills everything
  left in the namespace (`setsid` daemons included).
- `mount-ro`: a mount namespace of its own in which every mount is read-only, except the worker's folder, bound back
  writable (and the build cache, where workers build into it themselves: `MUSACODER_BUILD_BROKER=0`).
- `tmpfs`: fresh, private tmpfs mounts on `/tmp`, `/var/tmp` and over the folder holding all workers' folders.
- `dev`: a minimal `/dev` (null, zero, full, random, urandom, tty, fd links, a private `/dev/shm`, and the GPU's device
  nodes); no disks, no `/dev/mem`, no `/dev/kmsg`.
- `uid`: when the verifier runs as root, the worker becomes a uid and gid of its own (`worker_uid`: one per worker
  folder, in a range no host account uses), with no supplementary groups, umask 0 and `RLIMIT_NPROC` (which the
  kernel does not apply to uid 0) at `UID_NPROC_LIMIT`: a fork bomb is bounded without a pids cgroup, it cannot signal
  or read `/proc` of the verifier or another worker, and files only the verifier's user may read are closed to it.
  Its folder is given to it; every worker may add to the build cache, and finished entries are sealed against all
  (`open_cache`, `seal_builds`). Entered only where every folder
  it needs is still reachable as that uid (GPU workers too: CUDA IPC between a worker and the verifier under
  different uids works, `tests/gpu/test_ipc_memory.py`); `MUSACODER_WORKER_UID=0` keeps the verifier's uid.
- `caps`: every capability dropped (bounding set included) and `no_new_privs` set; the build's compilers inherit none.
- `landlock`: a Landlock ruleset (Linux 5.13+, no privilege needed): the worker and everything it starts may create,
  write, truncate, rename or delete files only in its folder, the build cache, the private `/tmp` and `/dev/shm` (when
  `tmpfs` and `dev` made them private) and the harmless and GPU device nodes, whatever the mounts allow; on kernels
  with Landlock ABI 6+ it may also signal only processes inside its own domain. It holds where `mount-ro` cannot (a
  GPU driver that fails inside a remounted tree) and does not depend on the static rules.
- `seccomp`: a filter (libseccomp, through `pyseccomp`) that answers EPERM to what a kernel never needs; see
  `DENIED_SYSCALLS`. Without `pid`, it also confines `kill`/`tkill`/`tgkill` to the worker and its process group.
- `rlimits`: open files, CPU seconds, and processes where the kernel enforces that limit (it does not for uid 0); the
  highest OOM score, so the kernel's OOM killer takes workers first.
- `pids-cgroup`: a pids cgroup of its own (cgroup v2, or the v1 `pids` hierarchy) capping its tasks, so a fork bomb
  cannot exhaust the host's process ids; removed by the trusted side after the worker ends.
- `memory-cgroup`: a memory cgroup of its own (the same v2 group, or one in the v1 `memory` hierarchy) capping the host
  memory of the worker and everything it starts at `worker_memory_mb()` (swap included where the kernel accounts it):
  past it the kernel kills the worker, not the host, and the verdict says so (`oom_kills`). GPU workers cannot use
  `RLIMIT_AS` (the driver reserves terabytes of address space), so on a GPU host this is the bound on host memory.

Environment (set by the trusted side, `musacoder.judge.sandbox`): `MUSACODER_SANDBOX` is the comma-separated list of
layers to enter (empty or unset: none), `MUSACODER_SANDBOX_WRITABLE` the folders bound back writable,
`MUSACODER_SANDBOX_READABLE` those bound back read-only (the build cache, which only the trusted side writes:
`musacoder.build.broker`), `MUSACODER_SANDBOX_HIDE` further folders covered by an empty tmpfs.
`MUSACODER_SANDBOX=0` in the verifier's own environment turns all of this off.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPORT = ".musacoder-sandbox.json"
WORKER_LAYERS = ("pid", "mount-ro", "tmpfs", "dev", "uid", "caps", "landlock", "seccomp", "rlimits",
                 "pids-cgroup", "memory-cgroup")
PREFIX_LAYERS = {"--net": "net", "--ipc": "ipc"}

NOFILE_LIMIT = int(os.environ.get("MUSACODER_NOFILE_LIMIT", "4096"))
NPROC_LIMIT = int(os.environ.get("MUSACODER_NPROC_LIMIT", "8192"))
PIDS_LIMIT = int(os.environ.get("MUSACODER_PIDS_LIMIT", "1024"))


def _default_worker_memory_mb() -> int:
    """Half the host's memory, at least 4 GiB: one worker holds the largest KernelBench task's inputs on the host
    (several GB each at the task files' own sizes) and cannot take the host down alone."""
    try:
        total_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                        if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError):
        return 16 * 1024
    return max(4096, total_kb // 1024 // 2)


def worker_memory_mb() -> int:
    """The `memory-cgroup` layer's cap on one worker's host memory: `MUSACODER_WORKER_MEMORY_MB`, read when a worker
    starts (a fork server's children get their own environment), else `_default_worker_memory_mb`."""
    value = os.environ.get("MUSACODER_WORKER_MEMORY_MB", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else _default_worker_memory_mb()
CPU_LIMIT_S = int(os.environ.get("MUSACODER_CPU_LIMIT_S", str(6 * 3600)))  # the wall-clock deadlines come first
TMPFS_SIZE = os.environ.get("MUSACODER_TMPFS_SIZE", "1g")
UID_BASE = int(os.environ.get("MUSACODER_WORKER_UID_BASE", "1900000000"))  # the `uid` layer's range: BASE + [0, SPAN)
UID_SPAN = 100_000_000
# tasks (threads too) of one worker's uid: torch's thread pools and a parallel build grow with the host's cores
UID_NPROC_LIMIT = int(os.environ.get("MUSACODER_UID_NPROC_LIMIT", str(max(1024, 16 * (os.cpu_count() or 1)))))

# Device nodes a worker may open: the harmless character devices, and the GPU's (by name prefix).
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
GPU_DEV_PREFIXES = ("nvidia", "dri", "kfd", "mtgpu", "musa")

# Answered with EPERM. Debugging and reading other processes; mounts and namespaces (the layers above must stay as
# they are); kernel modules, kexec, reboot, swap, port I/O; BPF, perf, keyrings, userfaultfd and io_uring (large
# kernel attack surfaces no kernel build or launch uses); file handles (open_by_handle_at reads any file of a mounted
# file system by handle, past the mount layout).
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "unshare", "setns",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff",
    "iopl", "ioperm", "keyctl", "add_key", "request_key", "open_by_handle_at", "name_to_handle_at", "acct",
    "quotactl", "syslog", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
    "setdomainname", "vhangup", "uselib", "personality",
)

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
NEW_NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
                       CLONE_NEWNET)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_MOVE, MS_REC = 1024, 2048, 4096, 8192, 16384
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
_MOUNT_FLAG_BY_OPTION = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                         "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
PR_CAPBSET_READ, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 23, 24, 38, 47, 4
_CAPABILITY_VERSION_3 = 0x20080522
AF_PACKET, SOCK_RAW = 17, 3

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: None if s is None else s.encode())
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def _prctl(option: int, arg: int = 0) -> int:
    return _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0),
                       ctypes.c_ulong(0))


# --------------------------------------------------------------------------------------------------------------------
# Before the worker exists: the prefixes and the fork server's PID namespaces
@functools.lru_cache(maxsize=None)
def _unshare_prefix(flags: tuple[str, ...]) -> tuple[str, ...]:
    """`unshare FLAGS --` if it runs here (as root, or as the root of an unprivileged user namespace), else ()."""
    exe = shutil.which("unshare")
    if exe:
        for extra in ((), ("--map-root-user",)):
            try:
                if subprocess.run([exe, *extra, *flags, "true"], capture_output=True, timeout=10).returncode == 0:
                    return (exe, *extra, *flags, "--")
            except (OSError, subprocess.SubprocessError):
                pass
    return ()


# The GPU checks' results, remembered across verifier processes for `MUSACODER_PROBE_MEMO_S` seconds (0: never): each
# check is a process creating a CUDA context, and every `verify`, `verify-batch` or `serve` process would otherwise
# pay for them again before its first worker starts. An entry holds only for the same boot, kernel, driver, cgroup,
# uid, Python, environment and this package's judge code (`_host_key`); it lives in the workers' base folder, which
# only the verifier's user may write, and is trusted only if that user owns it and no one else may write it.
PROBE_MEMO_S = float(os.environ.get("MUSACODER_PROBE_MEMO_S", str(6 * 3600)))
_memo_lock = threading.Lock()
_memo_reads = True  # `doctor` looks afresh (and records what it found)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


@functools.lru_cache(maxsize=None)
def _host_key() -> str:
    h = hashlib.sha256()
    for f in ("/proc/sys/kernel/random/boot_id", "/proc/driver/nvidia/version", "/proc/self/cgroup",
              "/proc/sys/kernel/unprivileged_userns_clone", "/proc/sys/user/max_user_namespaces"):
        h.update(f.encode() + b"\0" + _read_text(f).encode() + b"\0")
    env = sorted((k, v) for k, v in os.environ.items() if k != "MUSACODER_PROBE_MEMO_S" and (
        k.startswith(("MUSACODER_", "CUDA_", "NVIDIA_")) or k in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH")))
    h.update(repr((platform.release(), os.getuid(), sys.executable, sys.version, env)).encode())
    for src in sorted(Path(__file__).parent.glob("*.py")):
        h.update(src.name.encode() + src.read_bytes())
    return h.hexdigest()[:32]


def _memo_file() -> Path:
    return workers_base() / f"gpu-checks-{_host_key()}.json"


def _memo_load(path: Path) -> dict:
    """The memo's entries, or {} unless the verifier's user owns the file and its folder and no one else may write
    either (a worker that could plant entries could switch layers off for the next verifier)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    try:
        for st in (os.fstat(fd), os.stat(path.parent)):
            if st.st_uid != os.getuid() or st.st_mode & 0o022:
                return {}
        with os.fdopen(os.dup(fd), encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)


def _gpu_memo(key: list[str], compute, result_of):
    """`compute()`, or what it gave within `PROBE_MEMO_S` in an earlier process with the same `_host_key`. Only
    answers the check gave itself are kept (`result_of(value)` not None); a check that did not run is asked again."""
    if PROBE_MEMO_S <= 0:
        return compute()
    name, path = "\x1f".join(key), _memo_file()
    if _memo_reads:
        entry = _memo_load(path).get(name)
        if isinstance(entry, dict) and 0 <= time.time() - entry.get("t", -1e18) <= PROBE_MEMO_S:
            value = entry.get("v")
            return tuple(value) if isinstance(value, list) else value
    value = compute()
    if result_of(value) is not None and not str(result_of(value)).startswith(("the check wrote no result",
                                                                             "the check did not run")):
        with _memo_lock:
            entries = _memo_load(path)
            entries[name] = {"t": time.time(), "v": value}
            tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(entries, f)
                os.replace(tmp, path)
            except OSError:
                tmp.unlink(missing_ok=True)
    return value


# Prefix namespaces the GPU driver did not survive on this host, with the reason (see `_gpu_survives`).
PREFIX_GPU_NOTES: dict[str, str] = {}


@functools.lru_cache(maxsize=None)
def _gpu_check_under(prefix: tuple[str, ...]) -> str:
    """`gpu_selfcheck()`'s result in a process started under `prefix` (entering no worker layer); remembered across
    processes by `_gpu_memo`."""
    return _gpu_memo(["prefix", *prefix], lambda: _gpu_check_under_now(prefix), lambda got: got)


def _gpu_check_under_now(prefix: tuple[str, ...]) -> str:
    scratch = Path(tempfile.mkdtemp(prefix="probe-", dir=workers_base()))
    try:
        run = subprocess.run([*prefix, sys.executable, "-c",
                              "from musacoder.judge import isolation; isolation.gpu_selfcheck()"],
                             cwd=scratch, env=probe_env(scratch, ()), capture_output=True, text=True, timeout=60)
        try:
            return json.loads((scratch / GPU_REPORT).read_text())
        except (OSError, ValueError):
            return f"the check wrote no result: {run.stderr[-200:]}"
    except (OSError, subprocess.SubprocessError) as e:
        return f"the check did not run: {e}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _gpu_survives(prefix: tuple[str, ...]) -> bool:
    """On a host with an NVIDIA GPU that works outside any namespace, whether it still works under `prefix` (some
    hosts refuse the driver inside a new namespace: gVisor's GPU proxy answered CUDA error 304 there). Hosts without
    a GPU, or whose GPU fails anyway, keep every namespace."""
    if not prefix or not _host_has_nvidia_gpu() or _gpu_check_under(()) != "ok":
        return True
    got = _gpu_check_under(prefix)
    if got != "ok":
        for flag, layer in (*PREFIX_LAYERS.items(), ("--pid", "pid")):
            if flag in prefix:
                PREFIX_GPU_NOTES.setdefault(layer, f"left out: the GPU does not work inside it on this host ({got})")
    return got == "ok"


def _in_parallel(fn, items) -> list:
    """`[fn(x) for x in items]`, the calls run side by side: each GPU check is a process that creates a CUDA context
    (about a second), and a host that refuses some layers needs a dozen of them before the first worker starts."""
    items = list(items)
    if len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        return list(pool.map(fn, items))


SERVER_CHOICES = (("--net", "--ipc"), ("--net",), ("--ipc",))
PID_FLAGS = ("--pid", "--fork", "--kill-child")


def _check_prefixes_ahead() -> None:
    """Fill `_gpu_check_under`'s cache for every prefix `server_prefix` and `worker_prefix` may try, all at once."""
    if not _host_has_nvidia_gpu():
        return
    prefixes = {()} | {_unshare_prefix(f) for f in SERVER_CHOICES} | {_unshare_prefix((*f, *PID_FLAGS))
                                                                          for f in SERVER_CHOICES}
    _in_parallel(_gpu_check_under, sorted(prefixes - {()}, key=len) + [()])


def _first_usable(*choices: tuple[str, ...]) -> tuple[str, ...]:
    for flags in choices:
        prefix = _unshare_prefix(flags)
        if prefix and _gpu_survives(prefix):
            return prefix
    return ()


@functools.lru_cache(maxsize=None)
def server_prefix() -> tuple[str, ...]:
    """Prefix of the fork server (and so of every worker it forks): network and IPC namespaces of its own, or one of
    them, or nothing where neither is permitted (or, on a GPU host, where the GPU does not work inside them)."""
    _check_prefixes_ahead()
    return _first_usable(*SERVER_CHOICES)


@functools.lru_cache(maxsize=None)
def worker_prefix() -> tuple[str, ...]:
    """Prefix of a worker started with `python -m` (no fork server): the server's namespaces plus a PID namespace
    whose init is the worker (`unshare` stays its parent and is killed with it)."""
    flags = tuple(f for f in server_prefix() if f.startswith("--") and f not in ("--map-root-user", "--"))
    return _first_usable((*flags, *PID_FLAGS)) or server_prefix()


def prefix_layers(prefix) -> list[str]:
    return [layer for flag, layer in PREFIX_LAYERS.items() if flag in prefix]


_own_pid_ns: int | None = None


def new_pid_namespace_for_next_child(fresh: bool = True) -> None:
    """In the fork server, right before a fork: the next child becomes PID 1 of a PID namespace of its own (`fresh`),
    or is forked into the server's own (a worker that does not ask for the `pid` layer). The server itself stays
    where it is; it first returns its children's namespace to its own (a namespace may only be made as a child of the
    caller's active one), then makes a fresh one."""
    global _own_pid_ns
    if _own_pid_ns is None:
        _own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    _check(_libc.setns(ctypes.c_int(_own_pid_ns), ctypes.c_int(CLONE_NEWPID)), "setns")
    if fresh:
        _unshare(CLONE_NEWPID)


# --------------------------------------------------------------------------------------------------------------------
# In the worker
def enter_worker() -> list[str]:
    """Enter the layers listed in `MUSACODER_SANDBOX` that this host permits; write `REPORT` (entered layers and the
    reasons for those skipped) into the working folder; return the layers entered. Call before any candidate code
    exists and while the process has one thread."""
    wanted = [w for w in os.environ.get("MUSACODER_SANDBOX", "").split(",") if w in WORKER_LAYERS]
    if not wanted:
        return []
    cwd = os.getcwd()
    writable = [p for p in os.environ.get("MUSACODER_SANDBOX_WRITABLE", cwd).split(os.pathsep) if p]
    hide = [p for p in os.environ.get("MUSACODER_SANDBOX_HIDE", "").split(os.pathsep) if p]
    active: list[str] = []
    skipped: dict[str, str] = {}
    cgroups: list[str] = []
    own_pid_ns = os.getpid() == 1
    if "pid" in wanted:
        (active.append("pid") if own_pid_ns else skipped.setdefault("pid", "not the init of a PID namespace"))

    def attempt(layer: str, fn) -> None:
        if layer not in wanted:
            return
        try:
            fn()
            active.append(layer)
        except Exception as e:  # noqa: BLE001 - a layer the host does not permit is skipped and reported
            skipped[layer] = f"{type(e).__name__}: {e}"

    def cgroup_layer(controller: str, limits: dict[str, str]):
        group = _join_cgroup(f"musacoder-{Path(cwd).name}", controller, limits)
        if group not in cgroups:
            cgroups.append(group)

    # before the mounts turn /sys/fs/cgroup read-only
    attempt("pids-cgroup", lambda: cgroup_layer("pids", {"pids.max": str(PIDS_LIMIT)}))
    memory = str(worker_memory_mb() << 20)
    attempt("memory-cgroup", lambda: cgroup_layer("memory", {"memory.max": memory, "memory.swap.max": "0",
                                                             "memory.limit_in_bytes": memory,
                                                             "memory.memsw.limit_in_bytes": memory}))
    attempt("rlimits", _set_rlimits)  # before the mounts turn /proc read-only (the OOM score is written there)
    if {"mount-ro", "tmpfs", "dev"} & set(wanted):
        try:
            done = _isolate_files(cwd, writable, hide, own_pid_ns, wanted)
            active += [layer for layer in ("mount-ro", "tmpfs", "dev") if layer in done]
            skipped.update({layer: why for layer, why in done.items() if isinstance(why, str)})
        except Exception as e:  # noqa: BLE001
            for layer in ("mount-ro", "tmpfs", "dev"):
                if layer in wanted:
                    skipped[layer] = f"{type(e).__name__}: {e}"
    attempt("uid", lambda: _become_worker_uid(cwd, writable))
    attempt("caps", _drop_capabilities)
    attempt("landlock", lambda: _restrict_writes(writable, private_tmp="tmpfs" in active, private_dev="dev" in active))
    attempt("seccomp", lambda: _install_seccomp(confine_signals=not own_pid_ns))
    report = {"layers": [layer for layer in WORKER_LAYERS if layer in active], "skipped": skipped,
              "cgroups": cgroups}
    with open(os.path.join(cwd, REPORT), "w") as f:
        json.dump(report, f)
    return report["layers"]


def _mountinfo() -> list[tuple[str, int]]:
    """(mount point, per-mount flags) of every mount, in the order mounted (parents before children)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape")  # \040 for a space
        flags = 0
        for opt in fields[5].split(","):
            flags |= _MOUNT_FLAG_BY_OPTION.get(opt, 0)
        out.append((point, flags))
    return out


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _needed_paths() -> list[str]:
    """Folders the worker must still read: Python's prefix and import path, the folders torch and this package
    were imported from (they can lie under /tmp, e.g. a checkout and its virtual environment made there), and
    `MUSACODER_SANDBOX_READABLE` (the build cache under the build broker)."""
    found = {sys.prefix, sys.exec_prefix, sys.base_prefix, *[p for p in sys.path if p],
             *[p for p in os.environ.get("MUSACODER_SANDBOX_READABLE", "").split(os.pathsep) if p]}
    for name in ("musacoder", "torch"):
        f = getattr(sys.modules.get(name), "__file__", None)
        if f:
            found.add(os.path.dirname(os.path.dirname(f)))
    return sorted({os.path.realpath(p) for p in found if os.path.isdir(p)})


def _isolate_files(cwd: str, writable: list[str], hide: list[str], own_pid_ns: bool, wanted) -> dict:
    """A mount namespace of the worker's own: a fresh read-only /proc (with its own PID namespace), private tmpfs
    mounts on /tmp, /var/tmp and `hide`, a minimal /dev, `writable` bound back at their own paths, and every other
    mount read-only. Returns {layer: True or the reason it was skipped}."""
    done: dict = {}
    _unshare(CLONE_NEWNS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    host = _mountinfo()
    keep = {}
    for p in writable:
        try:
            keep[os.path.realpath(p)] = os.open(p, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            pass  # not there (yet): nothing to bind
    replaced = ["/proc"] if own_pid_ns else []
    covered = ["/tmp", "/var/tmp", *hide]
    readable: dict[str, int] = {}  # folders the worker needs that a new tmpfs would cover: bound back read-only
    for p in _needed_paths():
        if (any(_under(p, d) for d in covered) and not any(_under(p, k) for k in keep)
                and not any(_under(p, r) for r in readable)):
            try:
                readable[p] = os.open(p, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                pass
    try:
        if own_pid_ns:  # read-only: /proc/sys and /proc/sysrq-trigger are host-wide for uid 0
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
        if "tmpfs" in wanted or "dev" in wanted:  # the new /dev is staged inside the new /tmp
            for d in ["/tmp", "/var/tmp", *hide]:
                if os.path.isdir(d) and not any(_under(d, r) for r in replaced):
                    _mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={TMPFS_SIZE}")
                    replaced.append(d)
            done["tmpfs"] = True
        if "dev" in wanted:
            try:
                _new_dev()
                replaced.append("/dev")
                done["dev"] = True
            except OSError as e:
                done["dev"] = f"OSError: {e}"
        for path, fd in keep.items():
            os.makedirs(path, exist_ok=True)  # under a new tmpfs the path has to be made again
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND)
        for path, fd in readable.items():
            if any(_under(path, r) for r in replaced):
                os.makedirs(path, exist_ok=True)
                _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
                _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        if "tmpfs" in wanted:
            for path in HIDDEN_FILES:
                if os.path.isfile(path):
                    _mount("/dev/null", path, None, MS_BIND)
                    _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        if "mount-ro" in wanted:
            failed = []
            for point, flags in host:
                if any(_under(point, r) for r in replaced) or point in keep:
                    continue
                try:
                    _mount(None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)
                except OSError as e:
                    if e.errno != errno.ENOENT:  # a mount over a path that no longer resolves is unreachable
                        failed.append(f"{point} ({e.strerror})")
            done["mount-ro"] = f"left writable: {', '.join(failed)}" if failed else True
    finally:
        for fd in [*keep.values(), *readable.values()]:
            os.close(fd)
    os.chdir(cwd)  # through the new mounts (the old cwd is the host's folder)
    return done


def _new_dev() -> None:
    stage = "/tmp/.musacoder-dev"
    os.mkdir(stage, 0o755)
    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m")
    names = [n for n in DEV_NODES if os.path.exists(f"/dev/{n}")]
    names += sorted(n for n in os.listdir("/dev") if n.startswith(GPU_DEV_PREFIXES))
    for name in names:
        src, dst = f"/dev/{name}", f"{stage}/{name}"
        if os.path.isdir(src):
            os.mkdir(dst)
        else:
            open(dst, "w").close()
        _mount(src, dst, None, MS_BIND | MS_REC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{stage}/{name}")
    os.mkdir(f"{stage}/shm")
    _mount("tmpfs", f"{stage}/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={TMPFS_SIZE}")
    _mount(stage, "/dev", None, MS_MOVE)
    os.rmdir(stage)
    _mount(None, "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "mode=755")


def _set_rlimits() -> None:
    """Open files and CPU seconds always; processes where the kernel counts them (it never limits uid 0); and the
    highest OOM score (`oom_score_adj` 1000, inherited by every process it starts), so when the host runs out of
    memory the kernel's OOM killer takes the worker and its children before the verifier or anything else."""
    with open("/proc/self/oom_score_adj", "w") as f:  # raising one's own score needs no privilege
        f.write("1000")
    def lower(which, value):
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))

    lower(resource.RLIMIT_NOFILE, NOFILE_LIMIT)
    lower(resource.RLIMIT_CPU, CPU_LIMIT_S)
    if os.getuid() != 0:
        lower(resource.RLIMIT_NPROC, NPROC_LIMIT)


def worker_uid(folder: str) -> int:
    """The uid (and gid) of the worker in `folder`: one per worker folder, so each worker counts its own processes."""
    import zlib

    return UID_BASE + zlib.crc32(os.path.basename(os.path.normpath(folder)).encode()) % UID_SPAN


def _unreachable(path: str, need: int) -> str | None:
    """`path` if a user that owns nothing on its way could not reach it with `need` (the `other` permission bits,
    e.g. 0o5 to read a folder, 0o3 to write in one), else None."""
    parts = Path(os.path.realpath(path)).parts
    for i in range(1, len(parts) + 1):
        p = os.path.join(*parts[:i])
        try:
            mode = os.stat(p).st_mode
        except OSError:
            return p
        bits = need if i == len(parts) else 0o1
        if mode & bits != bits:
            return p
    return None


def _become_worker_uid(cwd: str, writable: list[str]) -> None:
    """The `uid` layer (see the module's docstring). Call after the mounts and the cgroup, before `caps`."""
    if os.getuid() != 0:
        raise OSError(errno.EPERM, "the verifier does not run as root: the worker keeps its (unprivileged) uid")
    # umask 0 for every worker of a verifier whose workers may change uid, those that keep uid 0 too: what any of them
    # makes in the shared build cache (a new key-prefix folder, a Triton cache folder), the others can build in
    os.umask(0)
    if os.environ.get("MUSACODER_WORKER_UID") == "0":
        raise OSError(errno.EPERM, "MUSACODER_WORKER_UID=0: workers keep the verifier's uid")
    base = os.path.dirname(os.path.realpath(cwd))  # the workers' folders (a fork server's is on its import path)
    checks = [(base, 0o1)]  # its own folder by its full path (TMPDIR, HOME)
    checks += [(p, 0o5) for p in _needed_paths() if not _under(p, base)]
    checks += [(p, 0o3) for p in writable if os.path.realpath(p) != os.path.realpath(cwd)]
    for path, need in checks:
        closed = _unreachable(path, need)
        if closed:
            raise OSError(errno.EACCES, f"an unprivileged uid could not use {path} ({closed} is closed to others)")
    uid = worker_uid(cwd)
    os.chown(cwd, uid, uid)
    _drop_bounding_set()  # needs CAP_SETPCAP, which the uid change takes away
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # the effective and permitted capabilities go with uid 0
    resource.setrlimit(resource.RLIMIT_NPROC, (UID_NPROC_LIMIT, UID_NPROC_LIMIT))


def open_cache(cache_dir: Path) -> None:
    """Lay the build cache out for workers running as uids of their own (the `uid` layer). Done once per cache folder
    and process, by the trusted side; every finished entry (`done` or `error.log` in it) is sealed (`seal_entry`).
    Under the build broker (`musacoder.build.broker`, the default) only the trusted side writes the cache: the cache
    folder, `ext/` and its 256 key-prefix folders are 0755, so no worker uid can add an entry either. Without it
    (`MUSACODER_BUILD_BROKER=0`) workers build into the cache themselves: those folders are 1777 (anyone may add, only
    the owner may rename or remove, as in /tmp), and the Triton and torch extension caches are writable by all."""
    from musacoder.build import broker

    _open_cache(str(cache_dir), broker.enabled())


@functools.lru_cache(maxsize=None)
def _open_cache(root: str, brokered: bool) -> None:
    ext = os.path.join(root, "ext")
    if not brokered:
        for sub in ("triton", "torch_extensions"):
            os.makedirs(os.path.join(root, sub), exist_ok=True)
            share_tree(os.path.join(root, sub))
    prefixes = [os.path.join(ext, f"{i:02x}") for i in range(256)]
    for folder in (root, ext, *prefixes):
        os.makedirs(folder, exist_ok=True)
        _set_mode(folder, 0o755 if brokered else 0o1777)
    for prefix in prefixes:
        with os.scandir(prefix) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False) and _finished(e.path) and not _sealed(e):
                    seal_entry(e.path)


def _set_mode(folder: str, mode: int) -> None:
    try:
        st = os.lstat(folder)
        if not os.path.islink(folder) and st.st_mode & 0o7777 != mode:
            os.chmod(folder, mode)
    except OSError:
        pass


def _sealed(e: os.DirEntry) -> bool:
    """Sealed before (`seal_entry` seals the folder first, then what is in it, and then no worker can add to it)."""
    st = e.stat(follow_symlinks=False)
    return st.st_uid == os.getuid() and st.st_mode & 0o7777 == 0o755


def _finished(entry: str) -> bool:
    return os.path.lexists(os.path.join(entry, "done")) or os.path.lexists(os.path.join(entry, "error.log"))


def seal_builds(cache_dir: Path, keys, layers, builder_uid: int) -> list[str]:
    """After a worker built (or failed to build) `keys`, before its candidate runs further: seal those finished cache
    entries (`seal_entry`) so no other worker uid can change what a later verification of the same sources loads.
    Only where the worker ran as a uid of its own (`uid` in `layers`, `builder_uid`). The keys come from the worker:
    anything but a 64-digit hex key is ignored, and only entries that uid made are sealed (a worker naming another's
    unfinished entry, after planting a `done` in it, must not get it sealed under the builder). Returns the entries
    sealed."""
    if "uid" not in layers or os.getuid() != 0:
        return []
    from musacoder.build.cache import entry_dir, is_build_key

    sealed = []
    for key in dict.fromkeys(keys):
        if not is_build_key(key):
            continue
        entry = str(entry_dir(cache_dir, key))
        try:
            st = os.lstat(entry)
        except OSError:
            continue
        if st.st_uid == builder_uid and os.path.isdir(entry) and not os.path.islink(entry) and _finished(entry):
            seal_entry(entry)
            sealed.append(entry)
    return sealed


def seal_entry(entry: str | Path) -> None:
    """Give a cache entry and everything in it to the verifier's user, writable by no one else (folders 0755, files
    without group and other write). Top-down, each node through a descriptor opened without following links, so a
    worker cannot swap in a link to elsewhere; a file with more than one link (a hard link to something outside) is
    left alone."""
    uid, gid = os.getuid(), os.getgid()

    def seal(path: str, is_dir: bool) -> None:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_DIRECTORY if is_dir else 0)
        try:
            fd = os.open(path, flags)
        except OSError:
            return  # a link, or gone
        try:
            st = os.fstat(fd)
            if not is_dir and st.st_nlink != 1:
                return
            os.fchown(fd, uid, gid)
            os.fchmod(fd, 0o755 if is_dir else st.st_mode & 0o7755 & ~0o6000)
            if is_dir:
                with os.scandir(fd) as it:
                    children = [(c.name, c.is_dir(follow_symlinks=False), c.is_symlink()) for c in it]
                for name, child_is_dir, is_link in children:
                    if is_link:
                        try:
                            os.lchown(os.path.join(path, name), uid, gid)
                        except OSError:
                            pass
                    else:
                        seal(os.path.join(path, name), child_is_dir)
        except OSError:
            pass
        finally:
            os.close(fd)

    seal(str(entry), True)


def share_tree(root: str | Path) -> None:
    """Make `root` and everything under it writable by every worker uid (folders 0777, files 0666, execute bits kept):
    for the caches the `uid` layer leaves open to all (Triton's, torch's extensions folder)."""
    for folder, dirs, files in os.walk(str(root)):
        share_path(folder)
        for f in files:
            share_path(os.path.join(folder, f))


def share_path(path: str | Path) -> None:
    """One folder (0777) or file (0666, execute bits kept) made writable by every worker uid; links are left alone."""
    try:
        st = os.lstat(path)
        bits = 0o777 if os.path.isdir(path) else 0o666
        if not os.path.islink(path) and st.st_mode & bits != bits:
            os.chmod(path, st.st_mode | bits)
    except OSError:
        pass


def _drop_bounding_set() -> None:
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        if _prctl(PR_CAPBSET_READ, cap) != 1:
            continue  # not in the set (dropped already, or unknown to this kernel)
        if _prctl(PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() not in (errno.EINVAL,):
            _check(-1, f"dropping capability {cap} from the bounding set")


def _drop_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets, and set no_new_privs: uid 0 keeps its
    file ownership but loses every privilege (mounts, raw I/O, DAC override, module loading), and so do the compilers
    it starts."""
    _drop_bounding_set()
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capset(header, data), "capset")
    _check(_prctl(PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")


# Landlock (include/uapi/linux/landlock.h): system calls 444-446 on every architecture, access rights by ABI version.
_LL_CREATE_RULESET, _LL_ADD_RULE, _LL_RESTRICT_SELF = 444, 445, 446
_LL_CREATE_RULESET_VERSION, _LL_RULE_PATH_BENEATH = 1, 1
_LL_WRITE_FILE, _LL_TRUNCATE, _LL_REFER = 1 << 1, 1 << 14, 1 << 13
_LL_DIR_WRITES = sum(1 << b for b in (4, 5, 6, 7, 8, 9, 10, 11, 12))  # remove dir/file, make char/dir/reg/sock/fifo/
_LL_SCOPE_SIGNAL = 1 << 1  # block/sym; the signal scope from ABI 6 on


class _LandlockRulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _LandlockPathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: not built in or not enabled at boot)."""
    ret = _libc.syscall(ctypes.c_long(_LL_CREATE_RULESET), None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_LL_CREATE_RULESET_VERSION))
    return max(0, ret)


def _writable_device_nodes() -> list[str]:
    return [f"/dev/{n}" for n in DEV_NODES if os.path.exists(f"/dev/{n}")] + sorted(
        f"/dev/{n}" for n in os.listdir("/dev") if n.startswith(GPU_DEV_PREFIXES))


def _restrict_writes(writable: list[str], private_tmp: bool, private_dev: bool) -> None:
    """Enter a Landlock domain in which files may be made, written, truncated, linked, renamed or removed only beneath
    `writable`, the private /tmp and /var/tmp (`private_tmp`), the private /dev/shm (`private_dev`), and the device
    nodes a worker needs (written, never made); with ABI 6+, signals reach only processes in the domain. Reads,
    execution and ioctls are not restricted here (the mounts and seccomp see to those)."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.EOPNOTSUPP, "Landlock is not enabled in this kernel")
    handled = _LL_WRITE_FILE | _LL_DIR_WRITES | (_LL_REFER if abi >= 2 else 0) | (_LL_TRUNCATE if abi >= 3 else 0)
    file_rights = handled & (_LL_WRITE_FILE | _LL_TRUNCATE)
    attr = _LandlockRulesetAttr(handled, 0, _LL_SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(attr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _libc.syscall(ctypes.c_long(_LL_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                            ctypes.c_uint32(0))
    if ruleset < 0:
        _check(-1, "landlock_create_ruleset")
    try:
        dirs = list(writable) + (["/tmp", "/var/tmp"] if private_tmp else []) + (["/dev/shm"] if private_dev else [])
        rules = [(d, handled) for d in dirs] + [(n, file_rights) for n in _writable_device_nodes()]
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not there: nothing to allow
            try:
                rule = _LandlockPathBeneathAttr(rights, fd)
                if _libc.syscall(ctypes.c_long(_LL_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(_LL_RULE_PATH_BENEATH),
                                 ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    _check(-1, f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:  # required for an unprivileged domain (the caps layer also sets it)
            _check(-1, "no_new_privs")
        _check(_libc.syscall(ctypes.c_long(_LL_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _complement_cubes(points: set[int], bits: int = 32) -> list[tuple[int, int]]:
    """(mask, value) pairs whose matches `x & mask == value` together cover every `bits`-bit value except `points`:
    the siblings of the points' paths in a binary trie (at most len(points)·bits pairs)."""
    full = (1 << bits) - 1
    out = []

    def walk(depth: int, prefix: int, inside: set[int]) -> None:
        mask = (full << (bits - depth)) & full
        if not inside:
            out.append((mask, prefix))
            return
        if depth == bits:
            return
        bit = 1 << (bits - depth - 1)
        walk(depth + 1, prefix, {p for p in inside if not p & bit})
        walk(depth + 1, prefix | bit, {p for p in inside if p & bit})

    walk(0, 0, {p & full for p in points})
    return out


def _install_seccomp(confine_signals: bool) -> None:
    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        try:
            f.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):
            pass  # not a system call on this architecture
    for flag in NEW_NAMESPACE_FLAGS:  # fork, threads and posix_spawn stay allowed
        f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # its flags sit behind a pointer; libc falls back to clone
    f.add_rule(deny, "socket", sc.Arg(0, sc.EQ, AF_PACKET))
    f.add_rule(deny, "socket", sc.Arg(1, sc.MASKED_EQ, 0xF, SOCK_RAW))
    if confine_signals:
        # Without a PID namespace: signals only to the worker itself (0, its pid) and its process group (-pgid; the
        # worker leads it). The pid argument is a C int: only its low 32 bits are compared.
        me = os.getpid()
        for mask, value in _complement_cubes({0, me, -os.getpgid(0)}):
            f.add_rule(deny, "kill", sc.Arg(0, sc.MASKED_EQ, mask, value))
        f.add_rule(deny, "tkill", sc.Arg(0, sc.NE, me))
        f.add_rule(deny, "tgkill", sc.Arg(0, sc.NE, me))
    f.load()


CGROUP_ROOT = Path("/sys/fs/cgroup")


def _join_cgroup(name: str, controller: str, limits: dict[str, str]) -> str:
    """Move this process into the cgroup `name` for `controller` and write `limits` (file -> value; files the
    hierarchy lacks are skipped, at least one must exist); returns the group's path. In cgroup v2 one group holds
    every controller: a second call finds this process already in `name` and adds its controller there. In v1 each
    controller has its own hierarchy, and its own group."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    if (CGROUP_ROOT / "cgroup.controllers").exists():  # pure v2
        own = CGROUP_ROOT / next(line.split(":", 2)[2] for line in lines if line.startswith("0::")).lstrip("/")
        parent = own.parent if own.name == name else own
    else:
        parent = None
        for line in lines:
            _, controllers, own_path = line.split(":", 2)
            if controller in controllers.split(","):
                mount = next((m for m in (CGROUP_ROOT / controller, CGROUP_ROOT / controllers)
                              if (m / "cgroup.procs").exists()), None)
                if mount is not None:
                    parent = mount / own_path.lstrip("/")
                    break
        if parent is None:
            raise OSError(errno.ENOENT, f"no {controller} cgroup controller mounted")
    if (parent / "cgroup.subtree_control").exists() and \
            controller not in (parent / "cgroup.subtree_control").read_text().split():
        (parent / "cgroup.subtree_control").write_text(f"+{controller}")
    group = parent / name
    made = not group.is_dir()
    if made:
        group.mkdir()
    try:
        present = [f for f in limits if (group / f).exists()]
        if not any(f.startswith(controller + ".") for f in present):
            raise OSError(errno.ENOENT, f"the {controller} controller is not enabled in {group}")
        for f in present:
            try:
                (group / f).write_text(limits[f])
            except OSError:
                if f in ("memory.swap.max", "memory.memsw.limit_in_bytes"):  # swap: accounted on some kernels only
                    continue
                raise
        (group / "cgroup.procs").write_text("0")
    except OSError:
        if made:
            group.rmdir()
        raise
    return str(group)


def oom_kills(paths) -> int:
    """How many processes the kernel killed for going over the memory limit of these cgroups (a worker's report's
    `cgroups`): v2 `memory.events`, v1 `memory.oom_control`; 0 where neither is readable."""
    n = 0
    for path in paths or []:
        for f in ("memory.events", "memory.oom_control"):
            try:
                text = (Path(path) / f).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and value.strip().isdigit():
                    n += int(value)
    return n


# --------------------------------------------------------------------------------------------------------------------
# The trusted side: what to ask for, what was entered, cleaning up
def enabled() -> bool:
    return os.environ.get("MUSACODER_SANDBOX", "1") not in ("0", "false", "no", "off")


def workers_base() -> Path:
    """The folder that holds every worker's folder (`<system temp>/musacoder-<uid>`); workers see it as empty."""
    base = Path(tempfile.gettempdir()) / f"musacoder-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    return base


def worker_env(workdir: Path, cache_dir: Path) -> dict[str, str]:
    """The variables that tell a worker which layers to enter (those the probe found this host permits)."""
    if not enabled():
        return {"MUSACODER_SANDBOX": ""}
    from musacoder.build import broker

    layers = probe()["worker_layers"]
    if "uid" in layers:
        open_cache(cache_dir)
    # under the build broker only the trusted side writes the build cache: workers read it
    writable = [str(workdir)] if broker.enabled() else [str(workdir), str(cache_dir)]
    return {"MUSACODER_SANDBOX": ",".join(layers),
            "MUSACODER_SANDBOX_WRITABLE": os.pathsep.join(writable),
            "MUSACODER_SANDBOX_READABLE": str(cache_dir) if broker.enabled() else "",
            "MUSACODER_SANDBOX_HIDE": os.pathsep.join(hidden_folders())}


# Folders that hold users' files and secrets (SSH and cloud keys, tokens, other runs' outputs): covered by an empty
# tmpfs in the worker, with the parts of them it needs (the Python installation, this package, the build cache)
# bound back. `MUSACODER_SANDBOX_HIDE_EXTRA` adds more (os.pathsep-separated).
HIDDEN_FOLDERS = ("/root", "/home", "/mnt", "/media", "/srv")
# Files readable by uid 0 even without capabilities (their owner): an empty device is bound over them.
HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")


def hidden_folders() -> list[str]:
    """The folders a worker sees empty: the workers' own base folder, `HIDDEN_FOLDERS` and the extra ones."""
    extra = [p for p in os.environ.get("MUSACODER_SANDBOX_HIDE_EXTRA", "").split(os.pathsep) if p]
    return [str(workers_base()), *[p for p in (*HIDDEN_FOLDERS, *extra) if os.path.isdir(p)]]


def read_report(workdir: Path) -> dict:
    """The layers a worker entered, as it wrote them before saying `ready` ({} when it wrote none)."""
    try:
        report = json.loads((Path(workdir) / REPORT).read_text())
    except (OSError, ValueError):
        return {}
    return report if isinstance(report, dict) else {}


def release_cgroups(paths, timeout_s: float = 120.0) -> bool:
    """Remove a worker's cgroups (its report's `cgroups`) after it was killed; whether all are gone."""
    return all([release_cgroup(p, timeout_s) for p in paths or []])


def release_cgroup(path: str | None, timeout_s: float = 120.0) -> bool:
    """Remove a worker's cgroup after the worker was killed, waiting (at most `timeout_s`) until the kernel has
    reaped every task left in it: it refuses to remove a cgroup that is not empty, so a removed cgroup means that
    nothing of the worker survived. A thousand forked children of a worker that imported torch take about 10 s to
    die on two cores. Returns whether it is gone."""
    if not path or not Path(path).name.startswith("musacoder-") or not path.startswith("/sys/fs/cgroup/") \
            or ".." in Path(path).parts:
        return False
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def probe_env(scratch: Path, layers=WORKER_LAYERS) -> dict[str, str]:
    """The probe's environment: a worker's sandbox settings, and this package's folder ahead of the host's own import
    path (packages installed with `pip --target` under /tmp must be found behind the private /tmp, as in a worker)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LD_LIBRARY_PATH", "LANG")}
    src = str(Path(__file__).resolve().parents[2])
    env.update(MUSACODER_SANDBOX=",".join(layers), MUSACODER_SANDBOX_WRITABLE=str(scratch),
               MUSACODER_SANDBOX_HIDE=os.pathsep.join(hidden_folders()), HOME=str(scratch), TMPDIR=str(scratch),
               PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p))
    return env


GPU_REPORT = ".musacoder-gpu.json"


def gpu_selfcheck() -> str:
    """Whether this process can use NVIDIA GPU 0 through the driver API: init, a context, a 1 MiB allocation; "ok" or
    the first call that failed. Written to `GPU_REPORT` in the working folder (the probe runs it inside the layers)."""
    import ctypes

    try:
        cu = ctypes.CDLL("libcuda.so.1")
        n, dev, ctx, ptr = ctypes.c_int(), ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
        steps = (("cuInit", lambda: cu.cuInit(0)), ("cuDeviceGetCount", lambda: cu.cuDeviceGetCount(ctypes.byref(n))),
                 ("cuDeviceGet", lambda: cu.cuDeviceGet(ctypes.byref(dev), 0)),
                 ("cuDevicePrimaryCtxRetain", lambda: cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
                 ("cuCtxSetCurrent", lambda: cu.cuCtxSetCurrent(ctx)),
                 ("cuMemAlloc", lambda: cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))),
                 ("cuMemFree", lambda: cu.cuMemFree_v2(ptr)))
        result = "ok"
        for name, call in steps:
            err = call()
            if err != 0:
                result = f"{name} returned CUDA error {err}"
                break
            if name == "cuDeviceGetCount" and n.value < 1:
                result = "no device visible"
                break
    except (OSError, AttributeError) as e:
        result = f"libcuda: {e}"
    Path(GPU_REPORT).write_text(json.dumps(result))
    return result


def _host_has_nvidia_gpu() -> bool:
    return os.path.exists("/dev/nvidiactl")


def _probe_once(layers, gpu: bool) -> tuple[dict, str | None, str]:
    """Start a throw-away process the way a `python -m` worker starts (its prefix), let it enter `layers` and, with
    `gpu`, use the GPU inside them: (its report, the GPU check's result or None, the end of its stderr). GPU checks
    are remembered across processes (`_gpu_memo`): each creates a CUDA context, and a host that refuses some layers
    needs a dozen before its first worker starts."""
    if not gpu:
        return _probe_once_now(layers, gpu)

    def checked():  # what a later process may reuse: the layers entered and skipped, not this run's cgroup
        report, gpu_result, err = _probe_once_now(layers, gpu)
        return {k: report[k] for k in ("layers", "skipped") if k in report}, gpu_result, err

    return _gpu_memo(["layers", *layers], checked, lambda r: r[1] if r[0] else None)


def _probe_once_now(layers, gpu: bool) -> tuple[dict, str | None, str]:
    scratch = Path(tempfile.mkdtemp(prefix="probe-", dir=workers_base()))
    env = probe_env(scratch, layers)
    code = "from musacoder.judge import isolation; isolation.enter_worker()"
    if gpu:
        code += "; isolation.gpu_selfcheck()"
    err, gpu_result = "", None
    try:
        run = subprocess.run([*worker_prefix(), sys.executable, "-c", code], cwd=scratch, env=env,
                             capture_output=True, text=True, timeout=60)
        err = run.stderr[-500:]
        report = read_report(scratch)
        release_cgroups(report.get("cgroups"))
        if gpu:
            try:
                gpu_result = json.loads((scratch / GPU_REPORT).read_text())
            except (OSError, ValueError):
                gpu_result = f"the check wrote no result: {err[-200:]}"
    except (OSError, subprocess.SubprocessError) as e:
        report, err = {}, str(e)
        gpu_result = None if not gpu else f"the check did not run: {e}"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return report, gpu_result, err


def _layers_the_gpu_survives(entered: list[str], why: str = "") -> tuple[list[str], dict[str, str]]:
    """The largest part of `entered` inside which the GPU still works, found layer by layer, with the reason each
    left-out layer was left out (some hosts, e.g. gVisor's GPU proxy, refuse the driver inside a layer)."""
    # one layer at fault, perhaps only in the absence of another (a read-only host /dev/shm is replaced by the `dev`
    # layer's own, say): the whole set less each layer, side by side; the first that works, from the end, is kept
    less_one = _in_parallel(lambda layer: _probe_once([x for x in entered if x != layer], gpu=True)[1], entered)
    for layer, got in reversed(list(zip(entered, less_one))):
        if got == "ok":
            return ([x for x in entered if x != layer],
                    {layer: f"left out: the GPU does not work inside it with the other layers on this host ({why})"})
    left_out: dict[str, str] = {}
    alone = _in_parallel(lambda layer: _probe_once([layer], gpu=True)[1], entered)  # each layer alone
    for layer, got in zip(entered, alone):
        if got != "ok":
            left_out[layer] = f"left out: the GPU does not work inside it on this host ({got})"
    keep = [layer for layer in entered if layer not in left_out]
    while keep:  # and together: drop from the end until the rest works
        _, got, _ = _probe_once(keep, gpu=True)
        if got == "ok":
            break
        layer = keep.pop()
        left_out[layer] = f"left out: the GPU does not work inside it with the others on this host ({got})"
    return keep, left_out


_PROBE_LOCK = threading.Lock()


def probe() -> dict:
    """What this host permits, found once per process (callers on other threads wait for the first):
    {"prefix_layers", "worker_layers", "skipped", "gpu"}. A throw-away process enters every worker layer; on a host
    with an NVIDIA GPU it must also use the GPU inside them, and layers the GPU does not survive are left out (and
    reported) rather than leave every verification an `infra_error`. "gpu" is the check's result inside the layers
    kept (None without a GPU). The checks that do not depend on each other run side by side."""
    with _PROBE_LOCK:
        return _probe_host()


@functools.lru_cache(maxsize=None)
def _probe_host() -> dict:
    gpu = _host_has_nvidia_gpu()
    server_prefix(), worker_prefix()  # the prefixes first: every probe process starts under worker_prefix()
    if gpu:  # the whole set and the bare process side by side: the bare result is needed when the set fails
        (report, gpu_result, err), (_, bare, _) = _in_parallel(
            lambda layers: _probe_once(layers, gpu=True), [WORKER_LAYERS, []])
    else:
        report, gpu_result, err = _probe_once(WORKER_LAYERS, gpu)
    skipped = dict(report.get("skipped", {}))
    if not report:
        skipped = {layer: f"the probe wrote no report: {err}" for layer in WORKER_LAYERS}
    if "pid" in skipped and "pid" in PREFIX_GPU_NOTES:
        skipped["pid"] = PREFIX_GPU_NOTES["pid"]
    entered = list(report.get("layers", []))
    if gpu and gpu_result != "ok" and entered:
        if bare == "ok":  # the layers are what breaks it
            entered, left_out = _layers_the_gpu_survives(entered, gpu_result)
            skipped.update(left_out)
            gpu_result = "ok"
        else:
            gpu_result = f"the GPU does not work even outside the layers ({bare})"
    for flag, layer in PREFIX_LAYERS.items():
        if flag not in server_prefix():
            skipped[layer] = PREFIX_GPU_NOTES.get(layer, "unshare is missing or not permitted here")
    return {"prefix_layers": prefix_layers(server_prefix()), "worker_layers": entered, "skipped": skipped,
            "gpu": gpu_result if gpu else None}


probe.cache_clear = _probe_host.cache_clear  # tests probe again with other fakes


def layers() -> list[str]:
    """The layers workers on this host will run in (the fork server's path; a verdict's `sandbox` field lists those
    a given worker actually entered)."""
    if not enabled():
        return []
    p = probe()
    return p["prefix_layers"] + p["worker_layers"]


ALL_LAYERS = tuple(PREFIX_LAYERS.values()) + WORKER_LAYERS
# What `--require-sandbox` asks for: every layer but the cgroups, which hosts with an undelegated cgroup v2 lack
# (the PID namespace still kills everything left at the end; the pids cgroup only caps a fork bomb while it runs, and
# without the memory cgroup the worker's highest OOM score still makes it the kernel's first choice);
# Landlock, which kernels before 5.13 and many that build it without enabling it at boot lack (`mount-ro` keeps the
# host's files read-only where it is active); and `uid`, which has nothing to do where the verifier is not root.
STRICT_LAYERS = tuple(layer for layer in ALL_LAYERS
                      if layer not in ("pids-cgroup", "memory-cgroup", "landlock", "uid"))


def missing(active, required=STRICT_LAYERS) -> list[str]:
    """The layers of `required` not in `active` (a worker's `Sandbox.layers`, or `layers()` for this host)."""
    return [layer for layer in required if layer not in active]


def doctor() -> str:
    """A report of what this host permits and which layers workers will use, looked at afresh (not from the GPU
    checks' memo, which it refreshes)."""
    global _memo_reads
    _memo_reads = False
    p = probe() if enabled() else {"prefix_layers": [], "worker_layers": [], "skipped": {}, "gpu": None}
    active = set(p["prefix_layers"] + p["worker_layers"])
    try:
        import pyseccomp  # noqa: F401

        seccomp_lib = "pyseccomp and libseccomp found"
    except Exception as e:  # noqa: BLE001 - a missing libseccomp raises RuntimeError at import
        seccomp_lib = f"not usable ({type(e).__name__}: {e})"
    cgroup = "v2" if Path("/sys/fs/cgroup/cgroup.controllers").exists() else (
        "v1" if Path("/sys/fs/cgroup/pids").is_dir() else "none found")
    lines = [
        "musacoder sandbox doctor",
        f"  host: Linux {platform.release()} {platform.machine()}, uid {os.getuid()}, "
        f"unshare {'found' if shutil.which('unshare') else 'missing'}, cgroup {cgroup}, seccomp: {seccomp_lib}, "
        f"Landlock ABI {landlock_abi() or 'not enabled'}",
    ]
    if not enabled():
        lines.append("  MUSACODER_SANDBOX=0: the sandbox is turned off; workers get only their folder, scrubbed "
                     "environment and process group")
    for layer in ALL_LAYERS:
        mark = "yes" if layer in active else "no "
        why = "" if layer in active else f"  ({p['skipped'].get(layer, 'off')})"
        lines.append(f"  [{mark}] {layer}{why}")
    if os.getuid() == 0 and "pids-cgroup" not in active:
        if "uid" not in active:
            lines.append("  note: workers keep uid 0, which is exempt from RLIMIT_NPROC; without a pids cgroup a fork "
                         "bomb there is bounded only by the deadline and the PID namespace's kill")
    if "memory-cgroup" in active:
        lines.append(f"  each worker's host memory is capped at {worker_memory_mb()} MB (MUSACODER_WORKER_MEMORY_MB)")
    if p.get("gpu") is not None:
        lines.append(f"  GPU inside the layers: {p['gpu']}")
    lines.append(f"  layers: {', '.join(layer for layer in ALL_LAYERS if layer in active) or 'none'}")
    return "\n".join(lines)
