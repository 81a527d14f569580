"""Stage 3, in the trusted process: the binary rule (`musacoder.legality.binary`: imports and linked libraries) and
the machine-code rule (`musacoder.legality.machine_code`: clock reads) on every library the candidate loaded."""

from __future__ import annotations

import subprocess
from pathlib import Path

from musacoder.judge.stages.context import RunContext, Stop


def check_binaries(ctx: RunContext, builds: list[dict], sb) -> None:
    """Judge every ELF file of the builds the candidate loaded: those its worker reports (`builds`, from its `load`
    reply) and those the build broker built for it (`sb.served_keys`), read here from the cache (or, for a private
    build, from the worker's folder `sb.workdir`). A library a tool could not read is flagged, not held against the
    candidate. `Stop("illegal")` with the violations found."""
    from musacoder.build.cache import built_libraries, is_build_key
    from musacoder.legality.binary import library_violations
    from musacoder.legality.glue import glue_baseline
    from musacoder.legality.machine_code import ToolMissing, library_clock_reads

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

    for lib in libs:
        try:
            bad += library_violations(lib, cfg.allow_vendor_libs, glue=glue)
        except OSError:  # unreadable here (gone with a cleared cache, say): the verifier's, so not held against it
            missing.append(lib.name)
            continue
        try:
            bad += library_clock_reads(lib)
        except (ToolMissing, OSError, subprocess.SubprocessError) as e:
            uninspected.append(f"{lib.name} ({str(e)[:160]})")
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
