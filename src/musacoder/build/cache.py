"""The one place kernels are built: `load_inline` behind a content-addressed, concurrency-safe cache.

Inside a candidate worker, `torch.utils.cpp_extension.load_inline` is replaced (before the candidate is imported) by
`cached_load_inline`, so the candidate's own call builds through here:

* key = sha256 of the sources, function list, every flag, the backend, and the toolchain (torch, Python, host
  compiler, nvcc, target architectures), so an identical candidate never builds twice and a toolchain change rebuilds;
* the build lives in `CACHE/ext/<key[:2]>/<key>/`, guarded by an exclusive `flock` so concurrent workers building the
  same key wait for one another instead of corrupting it; a `done` marker is written only after a successful build;
* a failed build is cached too (its log), so a broken candidate resubmitted fails fast with the same message;
* the returned module is wrapped: every exported function counts its calls and opens a profiler range
  `musacoder::ext::<name>`, which proves at run time that the candidate's own code ran and attributes any aten op
  called from inside the C++ wrapper to it.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

BUILD_FORMAT = 1  # bump when the way musacoder builds changes


class BuildError(RuntimeError):
    """The candidate's extension failed to compile or link; `log` holds the compiler output."""

    def __init__(self, log: str):
        super().__init__("extension build failed")
        self.log = log


@dataclass
class BuildRecord:
    """What the hook saw while the candidate was imported."""

    builds: list[dict] = field(default_factory=list)  # {name, key, cached, seconds}
    error_log: str | None = None
    calls: dict[str, int] = field(default_factory=dict)  # exported function -> call count
    fast_build: str | None = None  # which lighter-header variant built it (None: built as written)
    # set by the worker while it profiles a forward call: the hooks then open their profiler ranges (torch's own
    # `_profiler_enabled` reads False under the profiler's all-threads option, so the worker says it instead)
    profiling: bool = False


@functools.lru_cache(maxsize=None)
def _tool_version(cmd: str) -> str:
    try:
        out = subprocess.run([cmd, "--version"], capture_output=True, text=True, timeout=30).stdout
        return out.strip().splitlines()[0] if out.strip() else "?"
    except (OSError, subprocess.SubprocessError):
        return "absent"


def cuda_home(env=None) -> str | None:
    env = os.environ if env is None else env
    for cand in (env.get("CUDA_HOME"), env.get("CUDA_PATH"), "/usr/local/cuda"):
        if cand and Path(cand, "bin", "nvcc").exists():
            return cand
    return None


def toolchain_id(with_cuda: bool, env=None) -> dict:
    """The toolchain a build in environment `env` (default: this process's) would use."""
    import torch

    env = os.environ if env is None else env
    tc = {"torch": torch.__version__, "python": sys.version.split()[0], "cxx": _tool_version(env.get("CXX", "c++")),
          "format": BUILD_FORMAT}
    if with_cuda:
        home = cuda_home(env)
        tc["nvcc"] = _tool_version(str(Path(home, "bin", "nvcc"))) if home else "absent"
        tc["arch"] = env.get("TORCH_CUDA_ARCH_LIST", "")
    return tc


def cuda_build_flags() -> tuple[list[str], list[str]]:
    """Extra include and link paths this machine's CUDA layout needs (`lib/` instead of `lib64/`, headers that only
    ship in the pip `nvidia-*` wheels)."""
    includes, ldflags = [], []
    home = cuda_home()
    if home:
        for libdir in ("lib64", "lib", "targets/x86_64-linux/lib"):
            if Path(home, libdir, "libcudart.so").exists() or Path(home, libdir, "libcudart_static.a").exists():
                ldflags.append(f"-L{Path(home, libdir)}")
                break
    try:
        import nvidia  # the wheels torch brings

        for base in getattr(nvidia, "__path__", []):
            for inc in sorted(Path(base).glob("*/include")):
                includes.append(str(inc))
    except ImportError:
        pass
    return includes, ldflags


def toolchain_env(device: str | None) -> dict[str, str]:
    """Variables the worker needs before torch is imported there: CUDA_HOME (torch reads it at import) and the target
    architecture (only the present GPU's, e.g. 9.0 on an H200; 9.0 when compile-checking without a GPU)."""
    env = {}
    home = cuda_home()
    if home and not os.environ.get("CUDA_HOME"):
        env["CUDA_HOME"] = home
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        arch = "9.0"
        if device and device.startswith("cuda"):
            import torch

            if torch.cuda.is_available():
                major, minor = torch.cuda.get_device_capability(torch.device(device))
                arch = f"{major}.{minor}"
        env["TORCH_CUDA_ARCH_LIST"] = arch
    if home and not os.environ.get("PYTORCH_NVCC") and os.environ.get("MUSACODER_PARALLEL_NVCC", "1") != "0":
        # host and device front ends of each .cu in parallel (musacoder/build/nvcc_parallel.py); same tools and flags
        env["PYTORCH_NVCC"] = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).with_name('nvcc_parallel.py')))}"
        env["MUSACODER_REAL_NVCC"] = str(Path(home, "bin", "nvcc"))
    return env


_EXT_H = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]torch/extension\.h[>\"][^\n]*$", re.M)
SLIM_MAIN_HEADERS = "#include <torch/types.h>\n#include <torch/python.h>"
LITE_INCLUDE = Path(__file__).parent / "lite_include"
LITE_MAIN_HEADERS = "#include <torch/csrc/utils/pybind.h>\n#include <torch/extension.h>"
CUDA_PRELUDE = "#include <cuda.h>\n#include <cuda_runtime.h>"


def _as_list(src) -> list[str]:
    if src is None:
        return []
    return [src] if isinstance(src, str) else list(src)


def fast_attempts(kwargs: dict) -> list[tuple[str, dict]]:
    """Lighter-header variants of the same build, tried in order before the build exactly as written.

    Almost all of a `load_inline` build is PyTorch's headers: `torch/extension.h` pulls in `torch/all.h` (nn, optim,
    jit, data, serialize …) for every translation unit, and `ATen/cuda/CUDAContext.h` the cuBLAS/cuSPARSE handles.
    * `lite`: `lite_include/` goes first on the include path, so the candidate's own `#include <torch/extension.h>`
      and `<ATen/cuda/CUDAContext.h>` get musacoder's light stand-ins (tensors, factories through the dispatcher,
      checks, streams, guards); the bindings use `torch/csrc/utils/pybind.h` instead of `torch/python.h`.
    * `slim`: the real headers, but `torch/types.h` + `torch/python.h` instead of `torch/extension.h`.
    The candidate's code is unchanged; a variant it does not compile with is skipped, and the last resort is the build
    exactly as written. Every variant goes through the same dispatcher, so runtime legality sees the same ops.
    """
    cpp = _as_list(kwargs.get("cpp_sources"))
    cuda = _as_list(kwargs.get("cuda_sources"))
    if kwargs.get("no_implicit_headers"):
        return []
    lite = dict(kwargs, no_implicit_headers=True, with_pytorch_error_handling=False)
    lite["cpp_sources"] = [LITE_MAIN_HEADERS] + cpp
    lite["extra_include_paths"] = [str(LITE_INCLUDE)] + list(kwargs.get("extra_include_paths") or [])
    if cuda:
        lite["cuda_sources"] = [CUDA_PRELUDE] + cuda
    slim = dict(kwargs, no_implicit_headers=True)
    slim["cpp_sources"] = [SLIM_MAIN_HEADERS] + [_EXT_H.sub("", c) for c in cpp]
    if cuda:
        slim["cuda_sources"] = ["#include <torch/types.h>\n" + CUDA_PRELUDE] + [_EXT_H.sub("", c) for c in cuda]
    return [("lite", lite), ("slim", slim)]


def build_key(kwargs: dict, backend: str, env=None) -> str:
    """The cache key of a `load_inline` call built in environment `env` (default: this process's; the build broker
    passes the worker's, whose toolchain variables, e.g. the target architecture, are its own)."""
    with_cuda = bool(kwargs.get("cuda_sources"))
    payload = {k: kwargs.get(k) for k in sorted(kwargs) if k not in ("verbose", "build_directory", "name")}
    payload["backend"] = backend
    payload["toolchain"] = toolchain_id(with_cuda, env)
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def entry_dir(cache_dir: Path, key: str) -> Path:
    """Where the build of `key` lives: `CACHE/ext/<key[:2]>/<key>/`."""
    return Path(cache_dir) / "ext" / key[:2] / key


_HEX = frozenset("0123456789abcdef")


def is_build_key(key) -> bool:
    """Whether `key` is one `build_key` could have made (64 hex digits): keys a worker reports or a bundle names are
    checked with this before they become paths."""
    return isinstance(key, str) and len(key) == 64 and set(key) <= _HEX


def _wrap_module(module, functions, record: BuildRecord, ext_name: str):
    """A proxy of the extension whose exported functions count calls and open a profiler range."""
    import torch

    if isinstance(functions, str):
        names = [functions]
    elif functions:
        names = list(functions)  # a list of names, or a dict name -> docstring
    else:
        names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
    proxy = SimpleNamespace()
    for n in dir(module):
        if not n.startswith("__"):
            setattr(proxy, n, getattr(module, n))
    for n in names:
        fn = getattr(module, n, None)
        if fn is None:
            continue
        label = f"musacoder::ext::{n}"

        def counted(*args, _fn=fn, _label=label, _n=n, **kw):
            record.calls[_n] = record.calls.get(_n, 0) + 1
            if not record.profiling:  # timed rounds: no range, so the harness adds next to nothing to the candidate's time
                return _fn(*args, **kw)
            with torch.profiler.record_function(_label):
                return _fn(*args, **kw)

        counted.__name__ = n
        setattr(proxy, n, counted)
    return proxy


def library_name(folder: Path, ext_name: str) -> str:
    """The module name of the extension library built in `folder`: `ext_name`, or `ext_name_v<N>` when torch's
    versioner renamed it (it does for each further variant built under one name in a process, so a build that the
    light headers did not compile carries `_v1`)."""
    names = sorted(p.name[: -len(".so")] for p in folder.glob(f"{ext_name}*.so"))
    exact = [n for n in names if n == ext_name or re.fullmatch(re.escape(ext_name) + r"_v\d+", n)]
    return exact[0] if len(exact) == 1 else ext_name


def build_into(real_load_inline, kwargs: dict, build_dir: Path, ext_name: str, record: BuildRecord):
    """Build `kwargs` (a `load_inline` call's, without name, folder or verbosity) in `build_dir` and import it: the
    lighter-header variants first (`fast_attempts`), then as written. Raises the builder's exception."""
    # torch's own batons (the entry's and each header variant's), left behind by a builder killed mid-build: whoever
    # builds here holds the key's lock or owns the folder, and torch would wait on one forever
    for stale in [build_dir / "lock", *build_dir.glob("*/lock")]:
        stale.unlink(missing_ok=True)
    attempts = fast_attempts(kwargs) if os.environ.get("MUSACODER_FAST_BUILD", "1") != "0" else []
    for label, variant in attempts:
        (build_dir / label).mkdir(parents=True, exist_ok=True)
        try:
            module = real_load_inline(name=ext_name, build_directory=str(build_dir / label), verbose=False, **variant)
            record.fast_build = label
            return module
        except Exception:  # noqa: BLE001 - needs more of the real headers: next variant
            pass
    build_dir.mkdir(parents=True, exist_ok=True)
    return real_load_inline(name=ext_name, build_directory=str(build_dir), verbose=False, **kwargs)


def deterministic_failure(log: str) -> bool:
    """A compiler or linker failure (remembered as the entry's `error.log`), not a build cut short."""
    return "Error building extension" in log


def import_entry(entry: Path, ext_name: str):
    """The finished build in `entry` imported, or None (not finished, or not importable here). `done` names the folder
    of the library; it must lie inside the entry, so an entry can only ever load its own files."""
    done = entry / "done"
    if not done.is_file():
        return None
    try:
        from torch.utils.cpp_extension import _import_module_from_library

        where = Path(done.read_text() or str(entry))
        if not where.resolve().is_relative_to(entry.resolve()):
            return None
        return _import_module_from_library(library_name(where, ext_name), str(where), True)
    except Exception:  # noqa: BLE001 - e.g. a library of another toolchain: built again
        return None


def built_libraries(key: str, roots) -> list[Path] | None:
    """Every ELF file of the finished build `key` (the extension library, any library it links from its own folder,
    the objects beside them): found in the entry `entry_dir(root, key)` of the first of `roots` that holds it
    finished (a cache, or a worker's private `mc-build` folder, where an entry is `root/key`). None when no root
    holds it. Only an entry whose `done` names a folder inside it counts, as for `import_entry`."""
    for root in roots:
        root = Path(root)
        for entry in (entry_dir(root, key), root / key):
            done = entry / "done"
            if not done.is_file():
                continue
            where = Path(done.read_text() or str(entry))
            if not where.resolve().is_relative_to(entry.resolve()):
                continue
            out = []
            for p in sorted(entry.rglob("*")):
                if p.is_file() and not p.is_symlink():
                    with open(p, "rb") as f:
                        if f.read(4) == b"\x7fELF":
                            out.append(p)
            return out
    return None


def jsonable(kwargs: dict) -> dict:
    """A `load_inline` call's arguments as plain data (paths and tuples become strings and lists), as `build_key`
    sees them: what a worker sends the build broker."""
    return json.loads(json.dumps(kwargs, default=str))


def make_cached_load_inline(real_load_inline, cache_dir: Path, backend: str, record: BuildRecord,
                            request_build=None):
    """Return the `load_inline` replacement installed in a candidate worker. With `request_build` (a candidate
    worker under the trusted side's build broker, `musacoder.build.broker`), a build missing from the cache is asked
    of the trusted side, which builds it in a separate sandboxed builder and installs it; the worker only reads the
    cache. Without it (`MUSACODER_BUILD_BROKER=0`, or no trusted side), the worker builds into the cache itself."""

    def cached_load_inline(name, cpp_sources, cuda_sources=None, functions=None, **kwargs):
        kwargs = dict(kwargs)
        for managed in ("build_directory", "verbose"):  # where and how loudly to build is the cache's business
            kwargs.pop(managed, None)
        kwargs.update(cpp_sources=cpp_sources, cuda_sources=cuda_sources, functions=functions)
        if cuda_sources:
            includes, ldflags = cuda_build_flags()
            kwargs["extra_include_paths"] = list(kwargs.get("extra_include_paths") or []) + includes
            kwargs["extra_ldflags"] = list(kwargs.get("extra_ldflags") or []) + ldflags
        if request_build is not None:
            kwargs = jsonable(kwargs)
        key = build_key(kwargs, backend)
        ext_name = f"mc_ext_{key[:20]}"  # independent of the candidate's chosen name: same sources, one build
        t0 = time.perf_counter()

        def failed(log: str, cached: bool):
            record.error_log = log
            record.builds.append({"name": str(name), "key": key, "cached": cached,
                                  "seconds": time.perf_counter() - t0, "ok": False})
            return BuildError(log)

        if request_build is not None:
            entry = entry_dir(cache_dir, key)
            module = import_entry(entry, ext_name)
            cached = module is not None
            if module is None and (entry / "error.log").is_file():
                raise failed((entry / "error.log").read_text(), True)
            if module is None:
                # the broker's key is the one that counts (computed by the trusted side in this worker's toolchain
                # environment; the same as ours unless the environments differ, when the lookup above misses)
                reply = request_build({"name": str(name), "kwargs": kwargs, "backend": backend})
                if not isinstance(reply, dict):
                    raise failed(f"the build broker answered {str(reply)[:300]}", False)
                if not reply.get("ok"):
                    raise failed(str(reply.get("log") or "the build failed"), False)
                if not is_build_key(reply.get("key")):
                    raise failed(f"the build broker answered without a key: {str(reply)[:300]}", False)
                key, record.fast_build = reply["key"], reply.get("fast")
                cached = bool(reply.get("cached"))  # built by another verification while this one waited
                ext_name = f"mc_ext_{key[:20]}"
                entry = entry_dir(cache_dir, key)
                module = import_entry(entry, ext_name)
                if module is None:
                    raise failed(f"the extension was built but does not import from {entry}", False)
            record.builds.append({"name": str(name), "key": key, "cached": cached,
                                  "seconds": time.perf_counter() - t0, "ok": True, "fast": record.fast_build})
            return _wrap_module(module, functions, record, ext_name)

        build_dir = entry_dir(cache_dir, key)
        build_dir.mkdir(parents=True, exist_ok=True)
        # read-only is enough for flock, so a lock file another uid made (another worker, or the trusted side
        # installing a build from another node) locks as well
        with open(os.open(build_dir.parent / f"{key}.lock", os.O_RDONLY | os.O_CREAT, 0o666)) as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (build_dir / "error.log").exists():
                raise failed((build_dir / "error.log").read_text(), True)
            module = import_entry(build_dir, ext_name)
            cached = module is not None
            done = build_dir / "done"
            if module is None and done.exists() and not os.access(build_dir, os.W_OK):
                # a sealed entry (the `uid` layer: finished entries belong to the verifier) that does not import
                # here: build privately in the worker's own folder rather than fail a candidate for the cache's state
                build_dir = Path.cwd() / "mc-build" / key
                build_dir.mkdir(parents=True, exist_ok=True)
                done = build_dir / "done"
            if module is None:
                try:
                    module = build_into(real_load_inline, kwargs, build_dir, ext_name, record)
                except Exception as e:  # noqa: BLE001 - every build failure becomes a compile_error
                    log = str(e) or f"{type(e).__name__} while building"
                    if deterministic_failure(log):  # a deterministic compiler failure: remember it
                        (build_dir / "error.log").write_text(log)
                    raise failed(log, False) from None
                done.write_text(str(Path(module.__file__).parent) if getattr(module, "__file__", None) else "")
        record.builds.append({"name": str(name), "key": key, "cached": cached, "seconds": time.perf_counter() - t0,
                              "ok": True, "fast": record.fast_build})
        return _wrap_module(module, functions, record, ext_name)

    return cached_load_inline


# `cpp_extension.load` arguments that `load_inline` takes as they are (the rest: sources, managed or refused)
_LOAD_PASSED = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths", "with_cuda",
                "is_python_module", "keep_intermediates")
_CUDA_SUFFIXES = (".cu", ".cuh")
_CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".c")
MAX_SOURCE_BYTES = 4 << 20  # one source file a candidate's `load` may name


class LoadSourceError(ValueError):
    """A `cpp_extension.load` source the worker does not build: outside the candidate's folder, not a regular file,
    of an unknown kind, or too large."""


def read_load_sources(sources, folder: Path) -> tuple[list[str], list[str]]:
    """The C++ and CUDA texts of a `load` call's `sources`, each a regular file inside `folder` (the candidate's
    working folder, where it wrote them): (cpp sources, cuda sources), in the order given. Raises `LoadSourceError`
    for anything else: a source the worker did not see written in its own folder is not the candidate's to build."""
    root = Path(os.path.realpath(folder))
    cpp, cuda = [], []
    for src in [sources] if isinstance(sources, (str, os.PathLike)) else list(sources or []):
        path = Path(os.path.realpath(os.path.join(root, os.fspath(src))))
        if not path.is_relative_to(root):
            raise LoadSourceError(f"cpp_extension.load: the source {os.fspath(src)!r} is outside the candidate's "
                                  f"working folder; write the source there first (a relative path such as "
                                  f"'kernel.cu'), or pass it to load_inline as a string")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as e:
            raise LoadSourceError(f"cpp_extension.load: cannot read the source {os.fspath(src)!r}: {e.strerror}") \
                from None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_mode & 0o170000 != 0o100000 or st.st_size > MAX_SOURCE_BYTES:
                raise LoadSourceError(f"cpp_extension.load: the source {os.fspath(src)!r} is not a regular file of "
                                      f"at most {MAX_SOURCE_BYTES >> 20} MB")
            text = f.read(MAX_SOURCE_BYTES + 1).decode("utf-8", errors="replace")
        if path.suffix in _CUDA_SUFFIXES:
            cuda.append(text)
        elif path.suffix in _CPP_SUFFIXES:
            cpp.append(text)
        else:
            raise LoadSourceError(f"cpp_extension.load: {os.fspath(src)!r} is neither a C++ nor a CUDA source "
                                  f"({', '.join(_CPP_SUFFIXES + _CUDA_SUFFIXES)})")
    if not cpp and not cuda:
        raise LoadSourceError("cpp_extension.load: no sources given")
    return cpp, cuda


def make_cached_load(cached_load_inline, folder: Path):
    """Return the `cpp_extension.load` replacement installed in a candidate worker: the sources it names are read
    from the candidate's working folder (`read_load_sources`) and built as the same call of `load_inline` would be,
    through `cached_load_inline` (the cache, the build broker, the build record the binary rule reads). The sources
    must define their own bindings (`PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)`), as `load` requires."""

    def cached_load(name, sources, *args, **kwargs):
        if args:
            raise TypeError("cpp_extension.load: pass the arguments after `sources` by keyword")
        for managed in ("build_directory", "verbose"):  # where and how loudly to build is the cache's business
            kwargs.pop(managed, None)
        if kwargs.pop("is_standalone", False):
            raise TypeError("cpp_extension.load: is_standalone=True builds an executable, not an extension")
        unknown = sorted(set(kwargs) - set(_LOAD_PASSED))
        if unknown:
            raise TypeError(f"cpp_extension.load: unsupported arguments {', '.join(unknown)}")
        cpp, cuda = read_load_sources(sources, folder)
        return cached_load_inline(name, cpp_sources=cpp, cuda_sources=cuda or None, functions=None, **kwargs)

    return cached_load


def make_counted_load_inline(real_load_inline, record: BuildRecord):
    """A builder other than torch's (torch_musa's `load_inline`, the musa backend on MUSA hardware) wrapped so its
    builds are recorded, its failures become `BuildError`s and its exported functions count calls like the cached
    builder's. It builds through the real builder as written: no cache, no light headers (unverified on MUSA)."""

    def counted_load_inline(name, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            module = real_load_inline(name, *args, **kwargs)
        except Exception as e:  # noqa: BLE001 - every build failure becomes a compile_error
            record.error_log = str(e) or f"{type(e).__name__} while building"
            record.builds.append({"name": str(name), "key": None, "cached": False,
                                  "seconds": time.perf_counter() - t0, "ok": False})
            raise BuildError(record.error_log) from None
        record.builds.append({"name": str(name), "key": None, "cached": False, "seconds": time.perf_counter() - t0,
                              "ok": True, "fast": None, "library": getattr(module, "__file__", None)})
        return _wrap_module(module, kwargs.get("functions"), record, str(name))

    return counted_load_inline


def clear_cache(cache_dir: Path) -> None:
    shutil.rmtree(Path(cache_dir) / "ext", ignore_errors=True)
