"""The worker's own set-up, done the same way whichever way it was started (forked by the fork server, or as
`python -m musacoder.judge.worker`, the plain start and the retry after a failed one), before any candidate code.

Whatever the harness itself changes in the process has to be done before the harness guard's snapshot
(`musacoder.judge.worker.guard`), or it is held against the candidate. The profiler's first start imports
`torch._inductor`, which replaces `torch.manual_seed` with a wrapper of its own and sets `TORCHINDUCTOR_CACHE_DIR`; the
fork server had imported it before forking, a plain worker imported it in the candidate's first profiled call, after
the snapshot, and so judged an honest kernel illegal. `prepare` imports every module the harness uses
(`HARNESS_MODULES`, also what the fork server preloads) in every worker, so both starts reach the snapshot in the
same state; the sandbox sets `TORCHINDUCTOR_CACHE_DIR` in every worker's environment, so inductor never sets it.
"""

from __future__ import annotations

import importlib
import os
import sys

# Modules the harness imports in the worker, imported before any candidate code (and preloaded by the fork server).
# torch._inductor: the profiler's first start imports it (about 900 modules, sympy among them).
HARNESS_MODULES = ("torch", "torch.profiler", "torch._inductor", "torch.utils.cpp_extension", "musacoder.judge.worker",
                   "musacoder.judge.worker.rpc", "musacoder.judge.protocol", "musacoder.judge.messages",
                   "musacoder.judge.inputs", "musacoder.judge.ipc", "musacoder.judge.timing", "musacoder.judge.slots",
                   "musacoder.legality.runtime", "musacoder.legality.machine_code", "musacoder.build.cache",
                   "musacoder.tasks", "musacoder.records")


def prepare() -> None:
    """Import `HARNESS_MODULES` (nothing left to do in a worker the fork server forked)."""
    for name in HARNESS_MODULES:
        importlib.import_module(name)


def drop_writable_import_paths() -> None:
    """Take the working directory off the import path (`python -m` put it first, and a forked worker's `""` means
    it too): the candidate's folder, where its native code can write, must not hold a module that a later import of
    the harness's would find first."""
    try:
        here = os.path.realpath(os.getcwd())
    except OSError:  # no working directory at all: nothing there to import from
        here = None
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != here]
    sys.path_importer_cache.clear()


def limit_resources() -> None:
    """No core dumps, the file-size limit (`MUSACODER_FSIZE_LIMIT`) and, where set, the address-space limit
    (`MUSACODER_AS_LIMIT`)."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    fsize = int(os.environ.get("MUSACODER_FSIZE_LIMIT", str(4 << 30)))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    as_limit = os.environ.get("MUSACODER_AS_LIMIT")
    if as_limit:
        resource.setrlimit(resource.RLIMIT_AS, (int(as_limit), int(as_limit)))
