"""The `pids-cgroup` and `memory-cgroup` layers: a worker joins cgroups of its own capping its tasks and its host
memory; the trusted side reads how many processes the kernel killed at that cap and removes the groups after the
worker ends."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path


CGROUP_ROOT = Path("/sys/fs/cgroup")


def join(name: str, controller: str, limits: dict[str, str]) -> str:
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
