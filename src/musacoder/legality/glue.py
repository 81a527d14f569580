"""What an extension imports before any code of the candidate's: the glue baseline of the binary rule.

The binary rule (`musacoder.legality.binary`) names forbidden imports by hand, but what PyTorch's headers and the
pybind11 they ship compile into every extension changes between versions: a CUDA extension built against torch 2.11
imports `PyDict_Next` and `PyObject_CallObject` through pybind11's glue, one built against torch 2.14 does not. A name
on a deny-list that the glue of the installed torch imports would make every extension `illegal`.

So a library's forbidden imports are checked against a baseline: the imports of an extension with no code of its
own (`torch::Tensor f(torch::Tensor x) { return x; }`, bound by `load_inline` with the default flags, the way
candidates are built). What it imports is the toolchain's doing, never the candidate's, and is not held against
it; the rest of the rule is unchanged. The baseline is built only when a library has a forbidden import (an honest
build on a toolchain the lists match never pays for it), once per environment (torch, Python, compiler), in a child
process, and kept as JSON under the cache folder. A kept baseline is read only if this user owns it and nobody else
may write it or its folder (a worker under another uid cannot widen it); otherwise it is built again.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

# the extension with no code of its own
SOURCE = "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x; }\n"
NAME = "mc_glue_baseline"
BUILD_TIMEOUT_S = 900
_CHILD = (
    "import sys\n"
    "from torch.utils.cpp_extension import load_inline\n"
    f"load_inline(name={NAME!r}, cpp_sources=[{SOURCE!r}], functions=['f'], build_directory=sys.argv[1], "
    "verbose=False)\n"
)


class Baseline(NamedTuple):
    """The glue's imports (`symbols`) and linked libraries (`needed`); `error` says why there is none."""

    symbols: frozenset[str]
    needed: frozenset[str]
    error: str | None = None


def environment_key() -> str:
    """What the glue depends on: torch (version and place), Python, the platform and the C++ compiler."""
    try:
        import torch

        torch_id = f"{torch.__version__}@{Path(torch.__file__).parent}"
    except ImportError:
        torch_id = "no torch"
    cxx = os.environ.get("CXX") or shutil.which("c++") or ""
    real = shutil.which(cxx) if cxx else None
    try:  # the compiler's file itself: an upgrade in place changes it
        st = os.stat(os.path.realpath(real)) if real else None
        compiler = f"{os.path.realpath(real)}:{st.st_size}:{st.st_mtime_ns}" if st else cxx
    except OSError:
        compiler = cxx
    parts = [torch_id, sys.version, platform.machine(), cxx, compiler]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


def _trusted(path: Path) -> bool:
    """This user's own file in this user's own folder, neither writable by group or others."""
    uid = os.getuid()
    try:
        for p in (path, path.parent):
            st = p.stat()
            if st.st_uid != uid or st.st_mode & 0o022:
                return False
    except OSError:
        return False
    return True


def _load(path: Path) -> Baseline | None:
    if not path.is_file() or not _trusted(path):
        return None
    try:
        data = json.loads(path.read_text())
        return Baseline(frozenset(map(str, data["symbols"])), frozenset(map(str, data["needed"])))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def build_baseline(workdir: Path) -> Baseline:
    """Build the extension with no code of its own under `workdir` (in a child process) and read its imports."""
    from musacoder.legality.binary import _needed, _read, _undefined

    workdir.mkdir(parents=True, exist_ok=True)
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, str(workdir)], capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT_S, cwd=workdir)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Baseline(frozenset(), frozenset(), f"the glue baseline did not build: {e}")
    lib = workdir / f"{NAME}.so"
    if r.returncode != 0 or not lib.is_file():
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        return Baseline(frozenset(), frozenset(), f"the glue baseline did not build (exit {r.returncode}): "
                                                  + " | ".join(tail)[:400])
    try:
        symbols, needed = _read(lib, _undefined, _needed)
    except (OSError, ValueError) as e:  # NotALibrary is a ValueError
        return Baseline(frozenset(), frozenset(), f"the glue baseline could not be read: {e}")
    return Baseline(frozenset(symbols), frozenset(needed))


@functools.lru_cache(maxsize=8)
def glue_baseline(cache_dir: Path) -> Baseline:
    """The baseline of this environment: kept under `cache_dir/glue`, built there once (under a lock) when missing;
    where that folder cannot be used, built in a temporary one for this process. It never raises: a failed build
    is a baseline with an `error`, remembered for this process only (the rule then stays as strict as its lists;
    the binary rule reads an `OSError` as an unreadable library, which would skip it)."""
    try:
        return _kept_or_built(Path(cache_dir) / "glue")
    except OSError:
        pass
    try:
        with tempfile.TemporaryDirectory() as tmp:
            return build_baseline(Path(tmp) / "build")
    except OSError as e:
        return Baseline(frozenset(), frozenset(), f"the glue baseline did not build: {e}")


def _kept_or_built(folder: Path) -> Baseline:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_uid != os.getuid():  # another uid's folder: nothing in it is opened or kept
        raise PermissionError(f"{folder} belongs to another user")
    os.chmod(folder, 0o700)
    key = environment_key()
    path = folder / f"{key}.json"
    if (kept := _load(path)) is not None:
        return kept
    with open(folder / f"{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (kept := _load(path)) is not None:
            return kept
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            got = build_baseline(Path(tmp) / "build")
        if got.error is None:
            with contextlib.suppress(OSError):  # not kept: built again by the next process, never twice here
                fd, tmp_json = tempfile.mkstemp(dir=folder, suffix=".json")
                with os.fdopen(fd, "w") as f:
                    json.dump({"symbols": sorted(got.symbols), "needed": sorted(got.needed), "source": SOURCE}, f)
                os.replace(tmp_json, path)
        return got


def report(cache_dir: Path) -> str:
    """For `musacoder doctor`: the baseline of this environment (built now if it is not kept), and which of its
    imports the binary rule's lists forbid (exempted, and names the lists should drop)."""
    from musacoder.legality.binary import symbol_violation

    base = glue_baseline(Path(cache_dir))
    if base.error:
        return f"binary rule's glue baseline: none ({base.error}); the rule is as strict as its lists"
    listed = sorted(s for s in base.symbols if symbol_violation(s))
    head = f"binary rule's glue baseline: {len(base.symbols)} imports of an extension with no code of its own"
    if not listed:
        return head + "; none on the rule's lists"
    return head + f"; {len(listed)} on the rule's lists, not held against candidates: {', '.join(listed)}"
