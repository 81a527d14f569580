"""In the worker: entering the layers listed in `MUSACODER_SANDBOX`, before any candidate code exists. The file
system layers (`mount-ro`, `tmpfs`, `dev`), the resource limits (`rlimits`) and the worker's own uid (`uid`) are
made here; the filters (`caps`, `landlock`, `seccomp`) in `filters` and the cgroups in `cgroups`."""

from __future__ import annotations

import errno
import json
import os
import resource
import sys
from pathlib import Path

from musacoder.judge.isolation.cgroups import join as join_cgroup
from musacoder.judge.isolation.filters import drop_bounding_set, drop_capabilities, install_seccomp, restrict_writes
from musacoder.judge.isolation.libc import (CLONE_NEWNS, MOUNT_FLAG_BY_OPTION, MS_BIND, MS_MOVE, MS_NODEV,
                                            MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, MS_REMOUNT, mount,
                                            unshare)
from musacoder.judge.isolation.settings import (CPU_LIMIT_S, DEV_NODES, GPU_DEV_PREFIXES, HIDDEN_FILES,
                                                NOFILE_LIMIT, NPROC_LIMIT, PIDS_LIMIT, REPORT, TMPFS_SIZE,
                                                UID_NPROC_LIMIT, WORKER_LAYERS, worker_memory_mb, worker_uid)


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
        group = join_cgroup(f"musacoder-{Path(cwd).name}", controller, limits)
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
    attempt("caps", drop_capabilities)
    attempt("landlock", lambda: restrict_writes(writable, private_tmp="tmpfs" in active, private_dev="dev" in active))
    attempt("seccomp", lambda: install_seccomp(confine_signals=not own_pid_ns))
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
            flags |= MOUNT_FLAG_BY_OPTION.get(opt, 0)
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
    unshare(CLONE_NEWNS)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
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
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)
        if "tmpfs" in wanted or "dev" in wanted:  # the new /dev is staged inside the new /tmp
            for d in ["/tmp", "/var/tmp", *hide]:
                if os.path.isdir(d) and not any(_under(d, r) for r in replaced):
                    mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={TMPFS_SIZE}")
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
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND)
        for path, fd in readable.items():
            if any(_under(path, r) for r in replaced):
                os.makedirs(path, exist_ok=True)
                mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
                mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        if "tmpfs" in wanted:
            for path in HIDDEN_FILES:
                if os.path.isfile(path):
                    mount("/dev/null", path, None, MS_BIND)
                    mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        if "mount-ro" in wanted:
            failed = []
            for point, flags in host:
                if any(_under(point, r) for r in replaced) or point in keep:
                    continue
                try:
                    mount(None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags)
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
    mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=1m")
    names = [n for n in DEV_NODES if os.path.exists(f"/dev/{n}")]
    names += sorted(n for n in os.listdir("/dev") if n.startswith(GPU_DEV_PREFIXES))
    for name in names:
        src, dst = f"/dev/{name}", f"{stage}/{name}"
        if os.path.isdir(src):
            os.mkdir(dst)
        else:
            open(dst, "w").close()
        mount(src, dst, None, MS_BIND | MS_REC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{stage}/{name}")
    os.mkdir(f"{stage}/shm")
    mount("tmpfs", f"{stage}/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={TMPFS_SIZE}")
    mount(stage, "/dev", None, MS_MOVE)
    os.rmdir(stage)
    mount(None, "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "mode=755")


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
    """The `uid` layer (see docs/isolation.md). Call after the mounts and the cgroup, before `caps`."""
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
    drop_bounding_set()  # needs CAP_SETPCAP, which the uid change takes away
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # the effective and permitted capabilities go with uid 0
    resource.setrlimit(resource.RLIMIT_NPROC, (UID_NPROC_LIMIT, UID_NPROC_LIMIT))
