"""What a worker must enter before it exists: the `unshare` prefix of the fork server (network and IPC namespaces)
and of a worker started with `python -m` (a PID namespace too), kept to the namespaces this host permits and, on a
GPU host, those inside which the GPU still works; and the fork server's fresh PID namespace for each worker."""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from musacoder.judge.isolation import checks
from musacoder.judge.isolation.libc import CLONE_NEWPID, check, libc, unshare
from musacoder.judge.isolation.settings import PREFIX_LAYERS, workers_base


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


# Prefix namespaces the GPU driver did not survive on this host, with the reason (see `_gpu_survives`).
PREFIX_GPU_NOTES: dict[str, str] = {}


@functools.lru_cache(maxsize=None)
def gpu_check_under(prefix: tuple[str, ...]) -> str:
    """`gpu_selfcheck()`'s result in a process started under `prefix` (entering no worker layer); remembered across
    processes by `checks.gpu_memo`, and in this one until `host.probing_with` resets it."""
    return checks.gpu_memo(["prefix", *prefix], lambda: _gpu_check_under_now(prefix), lambda got: got)


def _gpu_check_under_now(prefix: tuple[str, ...]) -> str:
    stand_in = checks.replaced()
    if stand_in is not None and stand_in.gpu_under is not None:
        return stand_in.gpu_under(prefix)
    scratch = Path(tempfile.mkdtemp(prefix="probe-", dir=workers_base()))
    try:
        run = subprocess.run([*prefix, sys.executable, "-c",
                              "from musacoder.judge import isolation; isolation.gpu_selfcheck()"],
                             cwd=scratch, env=checks.probe_env(scratch, ()), capture_output=True, text=True, timeout=60)
        try:
            return json.loads((scratch / checks.GPU_REPORT).read_text())
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
    if not prefix or not checks.has_nvidia_gpu() or gpu_check_under(()) != "ok":
        return True
    got = gpu_check_under(prefix)
    if got != "ok":
        for flag, layer in (*PREFIX_LAYERS.items(), ("--pid", "pid")):
            if flag in prefix:
                PREFIX_GPU_NOTES.setdefault(layer, f"left out: the GPU does not work inside it on this host ({got})")
    return got == "ok"


SERVER_CHOICES = (("--net", "--ipc"), ("--net",), ("--ipc",))
PID_FLAGS = ("--pid", "--fork", "--kill-child")


def _check_prefixes_ahead() -> None:
    """Fill `gpu_check_under`'s cache for every prefix `server_prefix` and `worker_prefix` may try, all at once."""
    if not checks.has_nvidia_gpu():
        return
    prefixes = {()} | {_unshare_prefix(f) for f in SERVER_CHOICES} | {_unshare_prefix((*f, *PID_FLAGS))
                                                                          for f in SERVER_CHOICES}
    checks.in_parallel(gpu_check_under, sorted(prefixes - {()}, key=len) + [()])


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
    check(libc.setns(ctypes.c_int(_own_pid_ns), ctypes.c_int(CLONE_NEWPID)), "setns")
    if fresh:
        unshare(CLONE_NEWPID)
