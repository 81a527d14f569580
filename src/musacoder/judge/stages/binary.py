"""Stage 3, in the trusted process: the binary rule (`musacoder.legality.binary`: imports and linked libraries) on
every ELF file of the builds the candidate loaded, and the machine-code rule (`musacoder.legality.machine_code`: clock
reads) on those the dynamic loader maps (libraries, not the object files they were linked from).

Both judgements of a library are kept under the build cache, keyed by its bytes and by everything the rules depend
on (`musacoder.legality.judgements.judgement_key`), so a library judged once is not read again by the next process
(`musacoder verify` is one process per call). A kept judgement is used only where this verification's worker could
not have written it (`_workers_cannot_write`) and nobody but this user can have (`recall_judgement`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

from musacoder.judge.stages.context import RunContext, Stop


def check_binaries(ctx: RunContext, builds: list[dict], sb) -> None:
    """Judge every ELF file of the builds the candidate loaded: those its worker reports (`builds`, from its `load`
    reply) and those the build broker built for it (`sb.served_keys`), read here from the cache (or, for a private
    build, from the worker's folder `sb.workdir`). A library a tool could not read is flagged, not held against the
    candidate. `Stop("illegal")` with the violations found."""
    from musacoder.build.cache import built_libraries, is_build_key
    from musacoder.legality.glue import glue_baseline

    v, cfg = ctx.verdict, ctx.cfg
    ok = [b for b in builds if isinstance(b, dict) and b.get("ok") is not False]
    keys = sorted(k for k in {b.get("key") for b in ok} | set(sb.served_keys) if is_build_key(k))
    # a builder other than the cache's (torch_musa's) builds in the worker's own folder and names its library
    private = [Path(b["library"]) for b in ok if b.get("key") is None and isinstance(b.get("library"), str)]
    if not keys and not private:
        return
    bad, missing, libs = [], [], []
    for key in keys:
        found = built_libraries(key, [cfg.cache_dir, sb.workdir / "mc-build"])
        if found is None:
            missing.append(key[:12])
        libs += found or []
    for lib in private:
        if lib.resolve().is_relative_to(sb.workdir.resolve()) and lib.is_file():
            libs.append(lib)
        else:
            missing.append(lib.name)
    uninspected, baselines = [], []

    def glue():  # built (or read from the cache) only when a library imports something forbidden
        baselines.append(glue_baseline(Path(cfg.cache_dir)))
        return baselines[-1]

    remember, seconds = _workers_cannot_write(sb), {}
    for lib in libs:
        try:
            violations, clock = _judge(lib, cfg, glue, baselines, remember, seconds)
        except OSError:  # unreadable here (gone with a cleared cache, say): the verifier's, so not held against it
            missing.append(lib.name)
            continue
        bad += violations
        if isinstance(clock, list):
            bad += clock
        else:
            uninspected.append(f"{lib.name} ({clock[:160]})")
    v.stage_s.update({f"binary.{part}": round(s, 4) for part, s in seconds.items()})
    if uninspected:
        v.flags.append(f"machine code not read for clock reads: {'; '.join(uninspected)}")
    if errors := sorted({b.error for b in baselines if b.error}):
        v.flags.append(f"binary rule judged without its glue baseline: {'; '.join(errors)}")
    if missing:
        v.flags.append(f"binary rule not applied (no finished, readable library) to: {', '.join(missing)}")
    if bad:
        v.stages["binary_legality"] = "failed"
        v.violations = list(dict.fromkeys(bad))
        raise Stop("illegal")
    v.stages["binary_legality"] = "ok"


def _judge(lib: Path, cfg, glue, baselines: list, remember: bool, seconds: dict[str, float] | None = None) \
        -> tuple[list[str], list[str] | str]:
    """(binary-rule violations, clock-read violations or why the machine code was not read) of the library `lib`,
    kept ones where `remember` allows. The binary rule judges the very bytes the key is made of. Raises `OSError`
    where the library cannot be read. `seconds` accumulates the time of each part (`recall`: reading the library and
    looking for a kept judgement, `wait` for another verification of this process reading the same library, `rule`,
    `cpu_code`, `gpu_code`), which the verdict's `stage_s` reports."""
    import time

    from musacoder.legality import binary, judgements

    seconds = {} if seconds is None else seconds

    def add(part: str, since: float) -> None:
        seconds[part] = seconds.get(part, 0.0) + time.monotonic() - since

    t0 = time.monotonic()
    data = binary.read_library(lib) if remember else None
    key = judgements.judgement_key(data, lib.name, cfg.allow_vendor_libs, _tools(lib)) if remember else None
    add("recall", t0)
    if key is None:
        return _read(lib, cfg, glue, baselines, None, data, add, seconds)
    t0 = time.monotonic()
    with _judging(key):  # the verifications of a batch that loaded this library: one reads it, the others recall
        add("wait", t0)
        t0 = time.monotonic()
        kept = judgements.recall_judgement(cfg.cache_dir, key)
        add("recall", t0)
        if kept is not None and isinstance(kept.get("clock_reads"), list) \
                and all(isinstance(m, str) for m in kept["clock_reads"]):
            return list(kept["violations"]), list(kept["clock_reads"])
        return _read(lib, cfg, glue, baselines, key, data, add, seconds)


_JUDGING: dict[str, threading.Lock] = {}
_JUDGING_GUARD = threading.Lock()


def _judging(key: str) -> threading.Lock:
    """The lock of one library's judgement in this process."""
    with _JUDGING_GUARD:
        return _JUDGING.setdefault(key, threading.Lock())


def _read(lib: Path, cfg, glue, baselines: list, key: str | None, data, add, seconds: dict[str, float]) \
        -> tuple[list[str], list[str] | str]:
    """Both rules on `lib` (`_judge`), the judgement kept under `key` where it is complete."""
    import time

    from musacoder.legality import binary, judgements
    from musacoder.legality.machine_code import ToolMissing, library_clock_reads

    errors_before = len([b for b in baselines if b.error])
    given = {"data": data} if data is not None else {}  # the bytes the key was made of
    t0 = time.monotonic()
    violations = binary.library_violations(lib, cfg.allow_vendor_libs, glue=glue, **given)
    add("rule", t0)
    clock: list[str] | str = []
    if not binary.is_relocatable(data if data is not None else _head(lib)):
        # (an object file beside the library runs only as part of the library linked from it, whose machine code is
        # read: objdump took 13 s over the 9,000 sections of an extension's main.o, 0.1 s over its library)
        try:
            clock = library_clock_reads(lib, seconds=seconds)
        except (ToolMissing, OSError, subprocess.SubprocessError) as e:
            clock = str(e) or type(e).__name__
    # kept only when complete: the machine code read, the glue baseline (where it was needed) there
    if key is not None and isinstance(clock, list) and len([b for b in baselines if b.error]) == errors_before:
        judgements.keep_judgement(cfg.cache_dir, key, {"violations": violations, "clock_reads": clock})
    return violations, clock


def _head(lib: Path) -> bytes:
    """The first bytes of `lib`, its ELF header's identification and type."""
    with open(lib, "rb") as f:
        return f.read(18)


def _tools(lib: Path) -> str:
    """The identity of the tools the machine-code rule reads `lib` with (path, size, modification time): objdump, and
    cuobjdump for a library with device code."""
    from musacoder.legality.machine_code import find_cuobjdump, has_device_code

    tools = [shutil.which("objdump")]
    if has_device_code(lib):
        tools.append(find_cuobjdump())
    out = []
    for t in tools:
        try:
            st = os.stat(os.path.realpath(t)) if t else None
            out.append(f"{os.path.realpath(t)}:{st.st_size}:{st.st_mtime_ns}" if st else "none")
        except OSError:
            out.append(f"{t}:unreadable")
    return ";".join(out)


def _workers_cannot_write(sb) -> bool:
    """Whether this verification's workers could not write under the build cache, so a kept judgement there is the
    trusted side's: they run as uids of their own (`uid`: the judgements' folder is this user's, 0700), or the file
    system is read-only to them but for their own folder (`mount-ro` under the build broker, where the cache is not
    among their writable folders). Elsewhere judgements are neither read nor kept."""
    from musacoder.build import broker

    layers = set(getattr(sb, "layers", ()) or ())
    return "uid" in layers or ("mount-ro" in layers and broker.enabled())
