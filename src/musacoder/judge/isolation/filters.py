"""The layers that filter what the worker's own process may do: `caps` (every capability dropped, no_new_privs),
`landlock` (writes confined to the worker's folders) and `seccomp` (the system calls a kernel never needs)."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

from musacoder.judge.isolation.libc import (AF_PACKET, CAPABILITY_VERSION_3, NEW_NAMESPACE_FLAGS, PR_CAP_AMBIENT,
                                            PR_CAP_AMBIENT_CLEAR_ALL, PR_CAPBSET_DROP, PR_CAPBSET_READ,
                                            PR_SET_NO_NEW_PRIVS, SOCK_RAW, check, libc, prctl)
from musacoder.judge.isolation.settings import DENIED_SYSCALLS, DEV_NODES, GPU_DEV_PREFIXES


def drop_bounding_set() -> None:
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        if prctl(PR_CAPBSET_READ, cap) != 1:
            continue  # not in the set (dropped already, or unknown to this kernel)
        if prctl(PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() not in (errno.EINVAL,):
            check(-1, f"dropping capability {cap} from the bounding set")


def drop_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets, and set no_new_privs: uid 0 keeps its
    file ownership but loses every privilege (mounts, raw I/O, DAC override, module loading), and so do the compilers
    it starts."""
    drop_bounding_set()
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    check(libc.capset(header, data), "capset")
    check(prctl(PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")


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
    ret = libc.syscall(ctypes.c_long(_LL_CREATE_RULESET), None, ctypes.c_size_t(0),
                        ctypes.c_uint32(_LL_CREATE_RULESET_VERSION))
    return max(0, ret)


def _writable_device_nodes() -> list[str]:
    return [f"/dev/{n}" for n in DEV_NODES if os.path.exists(f"/dev/{n}")] + sorted(
        f"/dev/{n}" for n in os.listdir("/dev") if n.startswith(GPU_DEV_PREFIXES))


def restrict_writes(writable: list[str], private_tmp: bool, private_dev: bool) -> None:
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
    ruleset = libc.syscall(ctypes.c_long(_LL_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                            ctypes.c_uint32(0))
    if ruleset < 0:
        check(-1, "landlock_create_ruleset")
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
                if libc.syscall(ctypes.c_long(_LL_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(_LL_RULE_PATH_BENEATH),
                                 ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    check(-1, f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:  # required for an unprivileged domain (the caps layer also sets it)
            check(-1, "no_new_privs")
        check(libc.syscall(ctypes.c_long(_LL_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)


def complement_cubes(points: set[int], bits: int = 32) -> list[tuple[int, int]]:
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


def install_seccomp(confine_signals: bool) -> None:
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
        for mask, value in complement_cubes({0, me, -os.getpgid(0)}):
            f.add_rule(deny, "kill", sc.Arg(0, sc.MASKED_EQ, mask, value))
        f.add_rule(deny, "tkill", sc.Arg(0, sc.NE, me))
        f.add_rule(deny, "tgkill", sc.Arg(0, sc.NE, me))
    f.load()
