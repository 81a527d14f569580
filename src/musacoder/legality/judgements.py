"""Judgements of the binary and machine-code rules remembered by library content.

Reading a library is quick, but the binary rule's `_bundled` reads PyTorch's compute libraries (hundreds of MB) in every
process that judges one, and a verifier started per call (`musacoder verify`) paid that for the same cached library
every time. So the trusted side keeps each library's judgement under the build cache, keyed by everything it depends on
(`judgement_key`), and a kept one is read only where nobody but this user can have written it (as the glue baseline
is: `musacoder.legality.glue`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from musacoder.legality.binary import _TORCH_COMPUTE_LIBS

JUDGEMENTS = "binary-rule"  # the folder under the build cache
_LEGALITY = Path(__file__).parent


@functools.lru_cache(maxsize=1)
def rules_digest() -> str:
    """What every judgement depends on besides the library and the options: the source of every module of
    `musacoder.legality` (the rules, the whitelists and policy they read: any change to them is another digest), the
    torch whose libraries and schemas `_bundled` and `_ops_structs` read (version, place, and the size and
    modification time of each compute library), and the glue baseline's environment (`glue.environment_key`)."""
    import hashlib

    from musacoder.legality.glue import environment_key

    h = hashlib.sha256()
    for f in sorted(_LEGALITY.rglob("*.py")):
        h.update(str(f.relative_to(_LEGALITY)).encode() + b"\0" + f.read_bytes() + b"\0")
    try:
        import torch

        h.update(f"torch {torch.__version__} {torch.__file__}".encode())
        for name in _TORCH_COMPUTE_LIBS:
            for lib in sorted((Path(torch.__file__).parent / "lib").glob(f"{name}.so*")):
                st = lib.stat()
                h.update(f"{lib.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    except ImportError:
        h.update(b"no torch")
    h.update(environment_key().encode())
    return h.hexdigest()


def judgement_key(data: bytes, name: str, allow_vendor_libs: bool, extra: str = "") -> str:
    """The key of a judgement of the library `name` whose bytes are `data`: their sha256, its name (the messages
    carry it), the policy option that changes the rule, `rules_digest`, and `extra` (the caller's: the tools that
    read its machine code, say)."""
    import hashlib

    parts = [hashlib.sha256(data).hexdigest(), name, f"vendor={bool(allow_vendor_libs)}", rules_digest(), extra]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _own_folder(folder: Path, make: bool) -> bool:
    """`folder` is (made, with `make`) this user's own, 0700: nobody else may write it."""
    try:
        if make:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = folder.stat()
        if st.st_uid != os.getuid():
            return False
        if st.st_mode & 0o077:
            if not make:
                return False
            os.chmod(folder, 0o700)
        return True
    except OSError:
        return False


def recall_judgement(cache_dir: Path, key: str) -> dict | None:
    """The judgement kept under `key`, or None: none kept, unreadable, or not trusted (the file or its folder owned by
    another uid, or writable by group or others: a worker running as another uid could have planted it)."""
    import json

    from musacoder.legality.glue import _trusted

    path = Path(cache_dir) / JUDGEMENTS / f"{key}.json"
    if not path.is_file() or not _trusted(path) or not _own_folder(path.parent, make=False):
        return None
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(got, dict) or got.get("key") != key or not isinstance(got.get("violations"), list) \
            or not all(isinstance(m, str) for m in got["violations"]):
        return None
    return got


def keep_judgement(cache_dir: Path, key: str, judgement: dict) -> None:
    """Keep `judgement` (JSON: `violations`, a list of messages, and what else the caller judged) under `key`,
    written whole (a temporary file renamed) into this user's own 0700 folder; never raises."""
    import json
    import tempfile

    folder = Path(cache_dir) / JUDGEMENTS
    if not _own_folder(folder, make=True):
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({**judgement, "key": key}, f)
        os.replace(tmp, folder / f"{key}.json")
    except (OSError, TypeError, ValueError):
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
