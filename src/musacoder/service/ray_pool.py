"""MooreEval across machines on Ray: GPU verifier actors, CPU build tasks and a build cache shared between nodes.

`RayVerifier` is a verifier callable (`verify(task, candidate, backend=, overrides=, config=) -> Verdict`), so the
service's job queue (`musacoder.service.jobs.JobQueue`) runs it exactly as it runs the local pool: deduplication,
the result cache, the bounded queue and deadlines stay in the `musacoder serve` process (the Ray driver).

- **One long-lived actor per GPU** (`VerifierActor`, `num_gpus=1`): it keeps its process, its CUDA context and the
  judge's fork server and started-ahead workers warm between jobs, and runs the same `musacoder.judge.pipeline.verify`
  as `verify-batch` (each candidate still in its own sandboxed worker process). An actor runs `jobs_per_actor`
  verifications at once; the judge's device slots share its GPU between them as on one machine.
- **Builds are Ray tasks on CPU resources** (`build_artifact`, `num_cpus=build_cpus`, no GPU): the candidate is
  imported in a sandboxed worker on a CPU node, its `load_inline` calls build through the content-addressed cache
  (`musacoder.build.cache`), and the resulting extension libraries come back as one bundle. The GPU actor then only
  installs the bundle and imports the library: no GPU waits on a compiler.
- **The build cache is shared through Ray's object store.** A bundle is keyed by the candidate's artifact key
  (sha256 of its code, backend and the target toolchain: torch, Python, host compiler, nvcc and GPU architecture).
  The driver keeps key → ObjectRef (LRU, `artifact_entries`); a later job with the same code on any node gets the
  same ObjectRef, and Ray moves the bytes to that node on first use (node to node, spilled to disk under memory
  pressure, freed when the driver forgets the key). The actor unpacks the bundle into its node's cache under the
  cache's own build keys (the same `flock` as the cache takes), so further jobs on that node hit the local disk.
  Why not a shared file system: none is assumed between Ray nodes, `flock` over NFS is unreliable, and the only bytes
  a verification needs are the extension libraries (hundreds of KB to a few MB), which the object store already moves
  with locality and reference counting. A node whose toolchain differs from the builder's gets no bundle and builds
  for itself (counted in `stats()["artifact_misses"]`), so a mismatch costs time, never a wrong verdict.
- **A job on an actor that dies is retried on another actor** (`max_attempts` in all). Ray restarts the dead actor
  (`max_restarts`). The job is answered `infra_error` only once every attempt failed, and then as the service's
  fault, with no reward, never as the candidate's failure.

Ray is optional (`pip install 'musacoder[ray]'`); it is imported only when a pool starts.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import os
import tarfile
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from musacoder.build.cache import entry_dir, is_build_key
from musacoder.config import VerifyConfig
from musacoder.records import Task, Verdict


class RayUnavailable(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached; the message says what to do."""


class RayPoolConfig(BaseModel):
    """How `musacoder serve --ray` uses a Ray cluster. Every option is documented where it is declared."""

    address: str = Field("auto", description="Ray cluster to join: `auto` (the one `ray start` runs on this "
                         "machine), `ray://HOST:PORT` or `HOST:PORT`, or `local` to start a private one here.")
    actors: int | None = Field(None, ge=1, description="Verifier actors; default one per GPU in the cluster.")
    gpus_per_actor: float = Field(1.0, ge=0, description="GPUs each actor holds (1: one actor per GPU).")
    jobs_per_actor: int = Field(2, ge=1, description="Verifications one actor runs at once (its GPU is shared by "
                                "the judge's device slots, as on one machine).")
    build_cpus: float = Field(1.0, gt=0, description="CPUs each build task reserves; builds never reserve a GPU.")
    max_attempts: int = Field(3, ge=1, description="Actors a job is tried on before it is answered infra_error "
                              "(an actor that dies mid-job is the service's fault, not the candidate's).")
    max_restarts: int = Field(-1, ge=-1, description="Times Ray restarts a dead actor (-1: always).")
    artifact_entries: int = Field(1024, ge=0, description="Build bundles the driver keeps in the object store "
                                  "(LRU); 0 disables building on CPU tasks (actors build for themselves).")
    actor_cache_dir: str | None = Field(None, description="Build cache on each actor's node; `{actor}` is replaced "
                                        "by the actor's rank. Default: the node's `$MUSACODER_CACHE_DIR` or "
                                        "~/.cache/musacoder.")
    builder_cache_dir: str | None = Field(None, description="Build cache on the builders' nodes (default as above).")
    verifier: str | None = Field(None, description="`module:function` the actors call instead of "
                                 "musacoder.judge.pipeline:verify (same signature).")
    namespace: str = Field("musacoder", description="Ray namespace of the actors.")


# ---- artifacts: what travels between nodes -------------------------------------------------------------------------
_KEEP_SUFFIXES = (".so", ".pyd")  # an import of a built extension needs only its library


def artifact_key(code: str, backend: str, toolchain: dict) -> str:
    """Content address of a candidate's build bundle: its code, backend and the target toolchain."""
    blob = json.dumps({"code": code, "backend": backend, "toolchain": toolchain}, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()


def pack_builds(cache_dir: Path, keys: list[str]) -> bytes:
    """A tar of the cache entries `keys` under `cache_dir/ext/`: each entry's `done` marker (rewritten relative to the
    entry, since the builder's absolute path means nothing elsewhere), its `error.log` (a cached compile failure) and
    its extension libraries. Object files and ninja state stay behind."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for key in dict.fromkeys(keys):
            if not is_build_key(key):  # the keys come from the worker's reply
                continue
            entry = entry_dir(cache_dir, key)
            if not entry.is_dir():
                continue
            done = entry / "done"
            if done.exists():
                where = done.read_text().strip()
                rel = os.path.relpath(where, entry) if where else "."
                _add_bytes(tar, f"{key}/done.rel", rel.encode())
            if (entry / "error.log").exists():
                tar.add(entry / "error.log", arcname=f"{key}/error.log")
            for lib in sorted(entry.rglob("*")):
                if lib.is_file() and lib.suffix in _KEEP_SUFFIXES:
                    tar.add(lib, arcname=f"{key}/{lib.relative_to(entry)}")
    return buf.getvalue()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def install_builds(cache_dir: Path, bundle: bytes) -> list[str]:
    """Unpack a `pack_builds` bundle into this node's cache; returns the keys installed now (entries already there
    are left alone). Each entry is unpacked into a staging folder and installed the one way the build broker
    installs a build (`musacoder.build.broker.install`: regular files only, `done` last, one rename), under the
    key's own lock, so workers building the same key here wait for it."""
    import fcntl
    import tempfile

    from musacoder.build import broker
    from musacoder.build.permissions import open_cache, seal_entry

    installed = []
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r") as tar:
        members: dict[str, list[tarfile.TarInfo]] = {}
        for m in tar.getmembers():
            key, _, rest = m.name.partition("/")
            if not is_build_key(key) or not rest or not m.isfile():
                continue
            members.setdefault(key, []).append(m)
        for key, files in members.items():
            entry = entry_dir(cache_dir, key)
            entry.parent.mkdir(parents=True, exist_ok=True)
            with open(entry.parent / f"{key}.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if (entry / "done").exists() or (entry / "error.log").exists():
                    continue
                with tempfile.TemporaryDirectory(prefix=".bundle-", dir=entry.parent) as staging:
                    stage = Path(staging)
                    rel = log = None
                    for m in files:
                        name = m.name.split("/", 1)[1]
                        data = tar.extractfile(m).read()
                        if name == "done.rel":
                            rel = data.decode().strip()
                        elif name == "error.log":
                            log = data.decode(errors="replace")
                        elif (target := (stage / name).resolve()).is_relative_to(stage.resolve()):
                            target.parent.mkdir(parents=True, exist_ok=True)  # a bundle names only its own files
                            target.write_bytes(data)
                    try:
                        if rel is not None:
                            broker.install(stage, entry, rel)
                        elif log is not None:
                            broker.install_failure(entry, log)
                        else:
                            continue
                    except broker.BuildRequestError:
                        continue  # a marker naming a folder outside the entry: not installed
                installed.append(key)
                if os.getuid() == 0:  # workers running as uids of their own (the `uid` layer) load it, none changes it
                    seal_entry(entry)
    if members and os.getuid() == 0:
        open_cache(Path(cache_dir))  # and may add entries of their own beside it
    return installed


def build_artifact(candidate: str, backend: str | None, task: Task, config: VerifyConfig, target: dict,
                   cache_dir: str | None) -> dict:
    """Build a candidate's extensions in a sandboxed worker on this (CPU) node and bundle them (a Ray task).

    Returns `{"key", "bundle" (bytes or None), "seconds", "note"}`. No bundle when there is nothing to build ahead
    (no code, a static-legality violation: the actor's own verdict reports those), when this node's toolchain is not
    the target's, or when the import failed for another reason than the compiler (the actor reports it). Never
    raises for the candidate's doing."""
    from musacoder.build.cache import toolchain_env, toolchain_id
    from musacoder.candidates import extract_code
    from musacoder.judge.baseline import load_request
    from musacoder.judge.sandbox import Sandbox
    from musacoder.legality.static import check_static
    from musacoder.config import default_cache_dir

    t0 = time.monotonic()
    out: dict[str, Any] = {"key": target.get("key"), "bundle": None, "seconds": 0.0, "note": ""}
    cand = extract_code(candidate)
    if cand.code is None:
        out["note"] = "nothing to build: no code extracted"
        return out
    backend = backend or cand.backend or "cpu"
    if check_static(cand.code, backend, config.allow_vendor_libs).violations:
        out["note"] = "nothing to build: static legality violation"
        return out
    cuda = backend == "cuda"
    env = toolchain_env(None) if cuda else {}
    if cuda and target.get("arch"):
        env["TORCH_CUDA_ARCH_LIST"] = target["arch"]
    mine = _comparable_toolchain(toolchain_id(cuda))
    if mine != _comparable_toolchain(target.get("toolchain", {})):
        out["note"] = f"toolchain differs from the target's ({mine} vs {target.get('toolchain')})"
        return out
    cache = Path(cache_dir) if cache_dir else default_cache_dir()
    cfg = config.model_copy(update={"cache_dir": cache})
    try:
        with Sandbox(cache, env=env, memory_limit_gb=cfg.memory_limit_gb, isolate_network=cfg.isolate_network) as sb:
            reply = sb.request(load_request(cand.code, backend, "cpu", cfg, task), cfg.build_timeout_s)
    except Exception as e:  # noqa: BLE001 - timeouts, a worker that died: the actor redoes the build and judges it
        out.update(note=f"build ahead failed ({type(e).__name__}: {str(e)[:200]}); the actor builds itself",
                   seconds=time.monotonic() - t0)
        return out
    keys = [b["key"] for b in (reply.get("builds") or []) if isinstance(b, dict) and isinstance(b.get("key"), str)]
    if keys:
        out["bundle"] = pack_builds(cache, keys)
    out["note"] = f"{len(keys)} extension build(s); import {'ok' if reply.get('ok') else reply.get('kind')}"
    out["seconds"] = time.monotonic() - t0
    return out


def _comparable_toolchain(tc: dict) -> dict:
    return {k: v for k, v in tc.items() if k != "arch"}  # the target's arch is passed to the builder's compiler


def _import_path(path: str):
    module, _, attr = path.partition(":")
    if not attr:
        raise ValueError(f"verifier {path!r}: expected module:function")
    return getattr(importlib.import_module(module), attr)


class VerifierActor:
    """One per GPU: the judge's `verify` with this node's build cache, kept warm between jobs (wrapped by
    `ray.remote` when a pool starts)."""

    def __init__(self, rank: int, cache_dir: str | None, jobs: int, verifier: str | None = None):
        from musacoder.config import default_cache_dir
        from musacoder.judge.sandbox import prestarted_workers

        self.rank = rank
        self.cache_dir = Path(cache_dir.replace("{actor}", str(rank))) if cache_dir else default_cache_dir()
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self._verify = _import_path(verifier or "musacoder.judge.pipeline:verify")
        # workers started ahead (GPU verifications) for as long as the actor lives
        self._prestart = prestarted_workers(jobs)
        self._prestart.__enter__()
        import torch

        if torch.cuda.is_available():
            torch.cuda.init()  # the trusted side's CUDA context, made once

    def info(self) -> dict:
        import ray
        import torch

        from musacoder.build.cache import toolchain_env, toolchain_id

        cuda = torch.cuda.is_available()
        arch = os.environ.get("TORCH_CUDA_ARCH_LIST") or (toolchain_env("cuda:0")["TORCH_CUDA_ARCH_LIST"]
                                                          if cuda else "9.0")
        ctx = ray.get_runtime_context()
        return {"rank": self.rank, "node_id": ctx.get_node_id(), "pid": os.getpid(), "gpu_ids": ray.get_gpu_ids(),
                "arch": arch, "toolchain": {"cpu": toolchain_id(False), "cuda": toolchain_id(True)},
                "cache_dir": str(self.cache_dir)}

    def verify(self, task: Task, candidate: str, backend: str | None, overrides: dict | None,
               config: VerifyConfig, artifacts: list) -> Verdict:
        import ray

        cfg = config.model_copy(update={"cache_dir": self.cache_dir})
        for ref in artifacts:  # a list, so Ray hands over the ObjectRef and the fetch happens here
            try:
                got = ray.get(ref)
            except Exception:  # noqa: BLE001 - a lost bundle only means building here
                continue
            if got.get("bundle"):
                install_builds(self.cache_dir, got["bundle"])
        return self._verify(task, candidate, backend=backend, overrides=overrides, config=cfg)


class RayVerifier:
    """The service's verifier on a Ray cluster (module docstring). `start()` joins the cluster and starts the
    actors; `close()` stops them. Thread-safe: the job queue calls it from many threads."""

    def __init__(self, config: RayPoolConfig | None = None):
        self.config = config or RayPoolConfig()
        self._lock = threading.Lock()
        self._actors: list[Any] = []
        self._info: list[dict] = []
        self._load: list[int] = []
        self._rr = 0
        self._artifacts: OrderedDict[str, Any] = OrderedDict()
        self._stats = {"jobs": 0, "retries": 0, "exhausted": 0, "builds": 0, "artifact_reuse": 0,
                       "artifact_misses": 0, "per_actor": {}}
        self._started = False
        self._ray = None
        self._owns_ray = False

    # ---- life cycle -------------------------------------------------------------------------------------------
    @property
    def slots(self) -> int:
        """Verifications that can run at once in the cluster (actors × jobs_per_actor)."""
        return max(1, len(self._actors) or (self.config.actors or 1)) * self.config.jobs_per_actor

    def start(self) -> "RayVerifier":
        with self._lock:
            if self._started:
                return self
            ray = import_ray()
            cfg = self.config
            if not ray.is_initialized():
                try:
                    if cfg.address == "local":
                        ray.init(namespace=cfg.namespace)
                    else:
                        ray.init(address=cfg.address, namespace=cfg.namespace)
                except (ConnectionError, RuntimeError, ValueError) as e:
                    raise RayUnavailable(f"cannot join the Ray cluster at {cfg.address!r} ({e}); start one with "
                                         "`ray start --head` (then --ray auto) or pass its address") from None
                self._owns_ray = True
            self._ray = ray
            gpus = ray.cluster_resources().get("GPU", 0)
            n = cfg.actors or int(gpus // cfg.gpus_per_actor if cfg.gpus_per_actor else 0)
            if n < 1:
                raise RayUnavailable(f"the Ray cluster has {gpus:g} GPU(s): no verifier actor can hold "
                                     f"{cfg.gpus_per_actor:g}; pass --ray-actors N (and --ray-gpus-per-actor 0 for "
                                     "CPU-only verification)")
            remote = ray.remote(VerifierActor).options(
                num_cpus=0, num_gpus=cfg.gpus_per_actor, max_restarts=cfg.max_restarts, max_task_retries=0,
                max_concurrency=cfg.jobs_per_actor)
            self._actors = [remote.remote(i, cfg.actor_cache_dir, cfg.jobs_per_actor, cfg.verifier) for i in range(n)]
            self._info = ray.get([a.info.remote() for a in self._actors])
            self._load = [0] * n
            self._build = ray.remote(build_artifact).options(num_cpus=cfg.build_cpus, num_gpus=0, max_retries=2)
            self._started = True
        return self

    def close(self) -> None:
        with self._lock:
            if not self._started:
                return
            for a in self._actors:
                try:
                    self._ray.kill(a, no_restart=True)
                except Exception:  # noqa: BLE001
                    pass
            self._actors, self._artifacts = [], OrderedDict()
            self._started = False
            if self._owns_ray:
                self._ray.shutdown()

    def __enter__(self) -> "RayVerifier":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def stats(self) -> dict:
        with self._lock:
            return json.loads(json.dumps({**self._stats, "actors": len(self._actors), "load": list(self._load),
                                          "artifacts": len(self._artifacts)}))

    def actor(self, rank: int):
        return self._actors[rank]

    def running_on(self) -> list[int]:
        """Jobs in flight per actor rank."""
        with self._lock:
            return list(self._load)

    # ---- one verification -------------------------------------------------------------------------------------
    def __call__(self, task: Task, candidate: str, backend: str | None = None, overrides: dict | None = None,
                 config: VerifyConfig | None = None) -> Verdict:
        self.start()
        cfg = config or VerifyConfig()
        ray = self._ray
        from ray.exceptions import GetTimeoutError, RayError, RayTaskError

        with self._lock:
            self._stats["jobs"] += 1
        tried: list[int] = []
        errors: list[str] = []
        for attempt in range(self.config.max_attempts):
            rank = self._pick(exclude=tried)
            try:
                artifacts = self._artifact(rank, task, candidate, backend, cfg)
                ref = self._actors[rank].verify.remote(task, candidate, backend, overrides, cfg, artifacts)
                verdict = ray.get(ref, timeout=cfg.build_timeout_s + cfg.timeout_s * 4 + 3600)
                if artifacts and verdict.build_s is not None and not verdict.build_cached and verdict.compiled:
                    with self._lock:
                        self._stats["artifact_misses"] += 1
                with self._lock:
                    per = self._stats["per_actor"]
                    per[str(rank)] = per.get(str(rank), 0) + 1
                return verdict
            except RayTaskError as e:  # the verifier itself raised (e.g. an unusable argument): no other actor helps
                raise e.as_instanceof_cause() from None
            except (RayError, GetTimeoutError) as e:  # the actor (or its node) died or hung: not the candidate
                errors.append(f"actor {rank}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                tried.append(rank)
                if attempt + 1 < self.config.max_attempts:
                    with self._lock:
                        self._stats["retries"] += 1
            finally:
                with self._lock:
                    self._load[rank] -= 1
        with self._lock:
            self._stats["exhausted"] += 1
        return Verdict(status="infra_error", task=task.key, backend=backend,
                       error=f"no verifier actor finished this job in {self.config.max_attempts} attempt(s): "
                             + "; ".join(errors),
                       feedback="The verification service lost the workers running this job. This is a fault of "
                                "the service, not of the candidate; retry later.",
                       flags=["actor_lost"])

    def _pick(self, exclude: list[int]) -> int:
        """The least-loaded actor not tried yet (round robin among equals); any actor once all were tried."""
        with self._lock:
            n = len(self._actors)
            order = [(self._rr + i) % n for i in range(n)]
            self._rr = (self._rr + 1) % n
            fresh = [r for r in order if r not in exclude] or order
            rank = min(fresh, key=lambda r: self._load[r])
            self._load[rank] += 1
            return rank

    def _artifact(self, rank: int, task: Task, candidate: str, backend: str | None, cfg: VerifyConfig) -> list:
        """[ObjectRef of the build bundle] for this candidate on actor `rank`'s toolchain, built on a CPU task if no
        bundle is known; [] when nothing is built ahead."""
        if self.config.artifact_entries == 0 or "cpp_extension" not in candidate and "load_inline" not in candidate:
            return []
        from musacoder.candidates import extract_code

        cand = extract_code(candidate)
        if cand.code is None:
            return []
        eff_backend = backend or cand.backend or "cpu"
        info = self._info[rank]
        toolchain = info["toolchain"]["cuda" if eff_backend == "cuda" else "cpu"]
        target = {"toolchain": toolchain, "arch": info["arch"] if eff_backend == "cuda" else None}
        key = artifact_key(cand.code, eff_backend, {**toolchain, "arch": target["arch"]})
        target["key"] = key
        with self._lock:
            ref = self._artifacts.get(key)
            if ref is not None:
                self._artifacts.move_to_end(key)
                self._stats["artifact_reuse"] += 1
            else:
                ref = self._build.remote(candidate, backend, task, cfg, target, self.config.builder_cache_dir)
                self._artifacts[key] = ref
                self._stats["builds"] += 1
                while len(self._artifacts) > self.config.artifact_entries:
                    self._artifacts.popitem(last=False)
        # wait for the build here (not in the actor, whose slots are for verifying), without fetching the bytes
        self._ray.wait([ref], fetch_local=False, timeout=cfg.build_timeout_s + 60)
        return [ref]


def import_ray():
    """`ray`, or RayUnavailable with the install hint."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable("`--ray` needs Ray: pip install 'musacoder[ray]'") from None
    return ray
