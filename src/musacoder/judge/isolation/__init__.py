"""Isolation layers of a candidate worker: namespaces, a read-only file system, dropped capabilities, a seccomp filter,
resource limits and cgroups, each used where the host permits it and skipped (and reported) otherwise.

- `prefix`: what a worker enters before it exists (the `unshare` prefix, the fork server's PID namespaces);
- `enter`, `filters`, `cgroups`: what the worker enters itself, first thing in `worker.main` (`enter_worker`);
- `host`, `checks`: what this host permits (`probe`, `layers`, `worker_env`) and `musacoder doctor`'s report;
- `settings`: the layer names, the limits, where workers' folders live.

The build cache's permissions for workers of their own uid are `musacoder.build.permissions`. Each layer, what it
stops and the variables that steer it: docs/isolation.md.
"""

from __future__ import annotations

from musacoder.build.permissions import open_cache, seal_builds, seal_entry
from musacoder.judge.isolation.cgroups import oom_kills, release_cgroup, release_cgroups
from musacoder.judge.isolation.checks import GPU_REPORT, gpu_selfcheck, probe_env
from musacoder.judge.isolation.enter import enter_worker
from musacoder.judge.isolation.filters import landlock_abi
from musacoder.judge.isolation.host import doctor, layers, probe, worker_env
from musacoder.judge.isolation.prefix import (new_pid_namespace_for_next_child, prefix_layers, server_prefix,
                                              worker_prefix)
from musacoder.judge.isolation.settings import (ALL_LAYERS, HIDDEN_FOLDERS, PIDS_LIMIT, PREFIX_LAYERS, REPORT,
                                                STRICT_LAYERS, UID_BASE, UID_SPAN, WORKER_LAYERS, enabled,
                                                hidden_folders, missing, read_report, worker_memory_mb, worker_uid,
                                                workers_base)

__all__ = ["ALL_LAYERS", "GPU_REPORT", "HIDDEN_FOLDERS", "PIDS_LIMIT", "PREFIX_LAYERS", "REPORT", "STRICT_LAYERS",
           "UID_BASE", "UID_SPAN", "WORKER_LAYERS", "doctor", "enabled", "enter_worker", "gpu_selfcheck",
           "hidden_folders", "landlock_abi", "layers", "missing", "new_pid_namespace_for_next_child", "oom_kills",
           "open_cache", "prefix_layers", "probe", "probe_env", "read_report", "release_cgroup", "release_cgroups",
           "seal_builds", "seal_entry", "server_prefix", "worker_env", "worker_memory_mb", "worker_prefix",
           "worker_uid", "workers_base"]
