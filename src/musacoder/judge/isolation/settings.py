"""What the isolation layers are and how far they limit a worker: the layer names, the resource limits, the system
calls answered with EPERM, the folders a worker sees empty, where workers' folders live and the report a worker
writes of the layers it entered."""

from __future__ import annotations

import json
import os
import tempfile
import zlib
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


# Folders that hold users' files and secrets (SSH and cloud keys, tokens, other runs' outputs): covered by an empty
# tmpfs in the worker, with the parts of them it needs (the Python installation, this package, the build cache)
# bound back. `MUSACODER_SANDBOX_HIDE_EXTRA` adds more (os.pathsep-separated).
HIDDEN_FOLDERS = ("/root", "/home", "/mnt", "/media", "/srv")


# Files readable by uid 0 even without capabilities (their owner): an empty device is bound over them.
HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")


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


def enabled() -> bool:
    """Whether the sandbox is on (`MUSACODER_SANDBOX=0` in the verifier's own environment turns it off)."""
    return os.environ.get("MUSACODER_SANDBOX", "1") not in ("0", "false", "no", "off")


def workers_base() -> Path:
    """The folder that holds every worker's folder (`<system temp>/musacoder-<uid>`); workers see it as empty."""
    base = Path(tempfile.gettempdir()) / f"musacoder-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    return base


def hidden_folders() -> list[str]:
    """The folders a worker sees empty: the workers' own base folder, `HIDDEN_FOLDERS` and the extra ones."""
    extra = [p for p in os.environ.get("MUSACODER_SANDBOX_HIDE_EXTRA", "").split(os.pathsep) if p]
    return [str(workers_base()), *[p for p in (*HIDDEN_FOLDERS, *extra) if os.path.isdir(p)]]


def worker_uid(folder: str) -> int:
    """The uid (and gid) of the worker in `folder`: one per worker folder, so each worker counts its own processes."""
    return UID_BASE + zlib.crc32(os.path.basename(os.path.normpath(folder)).encode()) % UID_SPAN


def read_report(workdir: Path) -> dict:
    """The layers a worker entered, as it wrote them before saying `ready` ({} when it wrote none)."""
    try:
        report = json.loads((Path(workdir) / REPORT).read_text())
    except (OSError, ValueError):
        return {}
    return report if isinstance(report, dict) else {}
