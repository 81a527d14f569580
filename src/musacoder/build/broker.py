"""The trusted side of builds: candidate workers read the build cache, only the trusted side writes it.

A candidate worker runs candidate code, so anything it writes into a shared cache is the candidate's to choose: a
library under another source's key would run in every later verification of that source. Under the broker
(`MUSACODER_BUILD_BROKER`, on by default under the sandbox) a worker whose candidate calls `load_inline` for a key the
cache lacks sends the call's arguments to its trusted side (`Sandbox.request` answers in the middle of the `load`
request), which

1. computes the key itself from those arguments (`build_key`): a worker cannot choose the key of what is built;
2. under the key's lock, builds them in a separate, fresh sandboxed worker (the builder: `op_build`, torch's own
   `load_inline` in its own folder; it never sees candidate Python, and the cache is read-only to it as to every
   worker);
3. copies the builder's folder into the cache (regular files and folders only, no links or hard links), writes
   `done` last and renames the entry into place, or keeps the compiler's log as the entry's `error.log`.

The worker then imports the installed entry. Compiler flags still come from the candidate (`extra_cflags` can run a
program through the compiler's driver); that runs in the builder's sandbox and can only change what is built for
its own key, which are those same flags.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

from musacoder.build.cache import build_key, entry_dir
from musacoder.judge.messages import BuildRequest

MAX_BUILDS_PER_REQUEST = 16  # builds one worker request may ask for (a candidate's extensions; more is abuse)


def enabled() -> bool:
    return os.environ.get("MUSACODER_BUILD_BROKER", "1") not in ("0", "false", "no", "off")


class BuildRequestError(ValueError):
    """A build request that is not a `load_inline` call's arguments."""


def _check(request) -> tuple[dict, str]:
    if not isinstance(request, dict) or not isinstance(request.get("kwargs"), dict) \
            or not isinstance(request.get("backend"), str):
        raise BuildRequestError(f"malformed build request: {str(request)[:200]}")
    kwargs = request["kwargs"]
    if not isinstance(kwargs.get("cpp_sources"), (str, list)):
        raise BuildRequestError("a build request needs cpp_sources")
    return kwargs, request["backend"]


class BuildDeadline(Exception):
    """A build asked for too late to finish before the request's deadline: the request timed out (the candidate
    spent its time elsewhere), not a compile error."""


def serve(request, cache_dir: Path, builder, deadline: float, env=None) -> dict:
    """Answer one worker's build request: `{"key", "ok", "log"?, "fast"?, "cached"}`. `builder(msg, timeout_s,
    installer)` runs one `op_build` request in a fresh sandboxed worker and, if it built, calls `installer(stage,
    reply)` with the builder's `stage` folder before that worker is gone (`Sandbox.build_in_builder`). `env` is the
    worker's environment, whose toolchain variables are part of the key (`build_key`). Raises `BuildDeadline` when a
    build is needed and under a second of the deadline is left (the request timed out)."""
    kwargs, backend = _check(request)
    key = build_key(kwargs, backend, env)
    entry = entry_dir(cache_dir, key)
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.parent / f"{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (entry / "done").is_file():
            return {"key": key, "ok": True, "cached": True}
        if (entry / "error.log").is_file():
            return {"key": key, "ok": False, "cached": True, "log": (entry / "error.log").read_text()}
        left = deadline - time.monotonic()
        if left <= 1:
            raise BuildDeadline(f"no time left to build before the request's deadline ({max(left, 0.0):.1f} s)")
        reply = builder(BuildRequest(key=key, kwargs=kwargs, backend=backend), left,
                        lambda stage, built: install(stage, entry, str(built.get("rel") or ".")))
        if not reply.get("ok"):
            log = str(reply.get("log") or reply.get("error") or "the build failed")
            if reply.get("deterministic") is True:
                install_failure(entry, log)
            return {"key": key, "ok": False, "cached": False, "log": log}
        return {"key": key, "ok": True, "cached": False, "fast": reply.get("fast")}


def install(stage: Path, entry: Path, rel: str) -> None:
    """Copy a builder's `stage` folder into the cache as `entry`, the library's folder being `stage/rel`: regular files
    and folders only (links, hard links included, are dropped, so an entry holds only bytes the build wrote), `done`
    last, then one rename into place. The caller holds the key's lock."""
    where = (stage / rel).resolve()
    if not where.is_relative_to(stage.resolve()):
        raise BuildRequestError(f"the builder named a library folder outside its own: {rel!r}")
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name[:16]}-", dir=entry.parent))
    try:
        for folder, dirs, files in os.walk(stage, followlinks=False):
            out = tmp / os.path.relpath(folder, stage)
            out.mkdir(parents=True, exist_ok=True)
            os.chmod(out, 0o755)
            for f in files:
                src = os.path.join(folder, f)
                try:
                    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    continue  # a link, or gone
                with os.fdopen(fd, "rb") as fin:
                    st = os.fstat(fin.fileno())
                    if not (st.st_mode & 0o170000 == 0o100000) or st.st_nlink != 1:
                        continue  # not a regular file, or a hard link (to a file the trusted side would copy out)
                    with open(out / f, "wb") as fout:
                        shutil.copyfileobj(fin, fout)
                    os.chmod(out / f, 0o755 if st.st_mode & 0o111 else 0o644)
        (tmp / "done").write_text(str(entry / os.path.relpath(where, stage.resolve())))
        os.chmod(tmp / "done", 0o644)
        if entry.exists():  # an unfinished entry (a builder of the older, in-worker kind was killed mid-build)
            shutil.rmtree(entry)
        os.rename(tmp, entry)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def install_failure(entry: Path, log: str) -> None:
    """Remember a deterministic compiler failure as the entry's `error.log`, put into place by one rename. The caller
    holds the key's lock."""
    if entry.exists():
        shutil.rmtree(entry)
    tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name[:16]}-", dir=entry.parent))
    (tmp / "error.log").write_text(log)
    os.chmod(tmp, 0o755)
    os.chmod(tmp / "error.log", 0o644)
    os.rename(tmp, entry)
