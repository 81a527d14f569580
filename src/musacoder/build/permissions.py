"""Who may write the build cache: laid out for workers that run as uids of their own (the sandbox's `uid` layer),
finished entries sealed against every worker uid, and the caches left open to all of them made writable."""

from __future__ import annotations

import functools
import os
from pathlib import Path


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
