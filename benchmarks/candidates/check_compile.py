"""Compile-check the CUDA candidates without a GPU.

For every candidate file (``benchmarks/candidates/cuda/level*/*.py``) this script

1. byte-compiles the Python file and extracts the module-level string constants ``cuda_src`` and ``cpp_src``
   (via ``ast``, without importing the file, so nothing is built or run);
2. lints ``ModelNew.forward`` for the obvious forbidden patterns (``torch.*`` / ``F.*`` compute calls, calling
   submodules, ``try``) and the sources for cuBLAS / ATen compute calls;
3. compiles the CUDA sources with ``nvcc -c`` against torch's headers. Parsing torch's headers dominates the
   cost (~a minute per translation unit), so several candidates are batched into ONE translation unit: the
   ``#include`` lines are hoisted, each candidate's code (plus its ``cpp_src`` declarations, which checks that
   they match the definitions) goes into its own ``namespace cand_N { ... }``, and every macro it ``#define``s
   is ``#undef``-ed after it. If a batch fails, its candidates are re-compiled one per translation unit so the
   error is attributed to the right file.

nvcc runs one process at a time (CPU is scarce). Files whose content hash already passed are skipped
(cache in ``~/.cache/kbc_check_compile.json``; ``--force`` ignores it).

Usage:
    python benchmarks/candidates/check_compile.py [--batch 12] [--force] [--arch sm_90] [FILE ...]
"""
from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STD = os.environ.get("KBC_CXX_STD", "c++20")  # torch >= 2.10 headers need C++20
CACHE = os.path.expanduser("~/.cache/kbc_check_compile.json")

FORBIDDEN_SRC = [
    r"\bcublas\w*", r"\bcudnn\w*", r"\bat::(?!cuda::)\w+\s*\(", r"torch::(?!empty\b|empty_like\b|zeros\b|Tensor\b|kFloat32\b|kInt64\b|kFloat\b)\w+\s*\(",
    r"\bstd::thread\b", r"cudaStreamCreate",
]
# Names a forward may call: plumbing only.
ALLOWED_METHODS = {"contiguous", "view", "reshape", "size", "permute", "dim", "numel", "flatten", "unsqueeze", "squeeze",
                   "transpose", "expand", "stride", "is_contiguous"}
ALLOWED_TORCH = {"empty", "empty_like", "zeros", "ones", "full", "tensor"}


def extract(path: str) -> tuple[str, str, ast.Module]:
    src = open(path).read()
    tree = ast.parse(src, filename=path)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("cuda_src", "cpp_src") and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                found[name] = node.value.value
    if "cuda_src" not in found or "cpp_src" not in found:
        raise ValueError("module-level string constants cuda_src / cpp_src not found")
    return found["cuda_src"], found["cpp_src"], tree


def lint(path: str, cuda_src: str, cpp_src: str, tree: ast.Module) -> list[str]:
    problems = []
    for pat in FORBIDDEN_SRC:
        for m in re.finditer(pat, cuda_src + "\n" + cpp_src):
            problems.append(f"forbidden in C++/CUDA source: {m.group(0)!r}")
    model = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
    if not model:
        return problems + ["no class ModelNew"]
    for fn in model[0].body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "forward"):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Try):
                problems.append("try/except in forward")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                f = node.func
                base = f.value
                if isinstance(base, ast.Name) and base.id == "module":
                    continue  # our extension
                if isinstance(base, ast.Name) and base.id == "torch" and f.attr in ALLOWED_TORCH:
                    continue
                if isinstance(base, ast.Name) and base.id in ("torch", "F", "nn"):
                    problems.append(f"forward calls {base.id}.{f.attr}")
                elif f.attr not in ALLOWED_METHODS:
                    problems.append(f"forward calls method .{f.attr}()")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id not in ("float", "int", "bool", "len", "isinstance", "tuple", "list", "range"):
                    problems.append(f"forward calls {node.func.id}()")
    return problems


def split_includes(code: str) -> tuple[list[str], str, list[str]]:
    includes, body, macros = [], [], []
    for line in code.splitlines():
        s = line.strip()
        if s.startswith("#include"):
            includes.append(s)
        else:
            body.append(line)
            m = re.match(r"#\s*define\s+(\w+)", s)
            if m:
                macros.append(m.group(1))
    return includes, "\n".join(body), macros


def build_tu(items: list[tuple[str, str, str]]) -> str:
    incs: list[str] = []
    chunks = []
    for i, (path, cuda_src, cpp_src) in enumerate(items):
        inc, body, macros = split_includes(cuda_src)
        cinc, cbody, cmacros = split_includes(cpp_src)
        for x in inc + cinc:
            if x not in incs:
                incs.append(x)
        undefs = "\n".join(f"#undef {m}" for m in macros + cmacros)
        chunks.append(f"// ---- {os.path.relpath(path)}\nnamespace cand_{i} {{\n{body}\n// cpp_src declarations\n{cbody}\n}}  // namespace cand_{i}\n{undefs}\n")
    head = ["#include <torch/extension.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
    return "\n".join(dict.fromkeys(head + incs)) + "\n\n" + "\n".join(chunks)


def nvcc_cmd(cu: str, obj: str, arch: str) -> list[str]:
    import torch.utils.cpp_extension as ce
    try:
        incs = ce.include_paths(device_type="cuda")
    except TypeError:  # older torch
        incs = ce.include_paths(cuda=True)
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    incs = list(incs) + [os.path.join(cuda_home, "include")]
    import sysconfig
    incs.append(sysconfig.get_paths()["include"])
    try:
        import nvidia
        for base in nvidia.__path__:
            incs += sorted(glob.glob(os.path.join(base, "*", "include")))
    except ImportError:
        pass
    flags = list(ce.COMMON_NVCC_FLAGS) + ["-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=kbc_check",
                                          "-D_GLIBCXX_USE_CXX11_ABI=1"]
    return ([os.path.join(cuda_home, "bin", "nvcc"), "-c", cu, "-o", obj, f"-arch={arch}", f"-std={STD}", "-O1",
             "-w", "--threads", "1"] + flags + [f"-I{p}" for p in incs])


def compile_items(items, arch, workdir) -> tuple[bool, str, float]:
    cu = os.path.join(workdir, "batch.cu")
    with open(cu, "w") as f:
        f.write(build_tu(items))
    t0 = time.time()
    r = subprocess.run(nvcc_cmd(cu, cu + ".o", arch), capture_output=True, text=True)
    return r.returncode == 0, (r.stdout + r.stderr), time.time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--batch", type=int, default=12, help="candidates per translation unit")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--lint-only", action="store_true")
    ap.add_argument("--isolate", action="store_true", help="on a failed batch, recompile its candidates one by one")
    ap.add_argument("--symbols", action="store_true",
                    help="also judge each compiled batch by MooreEval's binary rule (its imports, "
                         "musacoder.legality.binary) and machine-code rule (clock reads, "
                         "musacoder.legality.machine_code); implies --force")
    args = ap.parse_args()
    files = args.files or sorted(glob.glob(os.path.join(HERE, "cuda", "level*", "*.py")))
    cache = {}
    if os.path.exists(CACHE) and not (args.force or args.symbols):
        cache = json.load(open(CACHE))
    failed: dict[str, str] = {}
    todo = []
    for path in files:
        try:
            src = open(path).read()
            compile(src, path, "exec")
            cuda_src, cpp_src, tree = extract(path)
        except Exception as e:  # report and go on with the others
            failed[path] = f"python: {e}"
            continue
        probs = lint(path, cuda_src, cpp_src, tree)
        if probs:
            failed[path] = "lint: " + "; ".join(probs)
            continue
        key = hashlib.sha256((args.arch + cuda_src + cpp_src).encode()).hexdigest()
        if cache.get(os.path.abspath(path)) == key:
            continue
        todo.append((path, cuda_src, cpp_src, key))
    print(f"{len(files)} files, {len(failed)} failed python/lint, {len(todo)} to compile")
    if args.lint_only:
        todo = []
    with tempfile.TemporaryDirectory() as wd:
        for b in range(0, len(todo), args.batch):
            batch = todo[b:b + args.batch]
            ok, log, dt = compile_items([(p, c, d) for p, c, d, _ in batch], args.arch, wd)
            print(f"batch {b // args.batch}: {len(batch)} candidates, {'OK' if ok else 'FAILED'} in {dt:.0f}s", flush=True)
            if ok and args.symbols:
                from musacoder.legality.binary import symbol_violation, undefined_symbols

                from musacoder.legality.machine_code import library_clock_reads

                bad = sorted({w for s in undefined_symbols(os.path.join(wd, "batch.cu.o"))
                              if (w := symbol_violation(s))})
                bad += library_clock_reads(os.path.join(wd, "batch.cu.o"))  # clocks read in its GPU or CPU code
                print(f"  imports and clock reads: {'none forbidden' if not bad else '; '.join(bad)}", flush=True)
                if bad:
                    for p, *_ in batch:
                        failed[p] = "symbols (batch " + str(b // args.batch) + "): " + "; ".join(bad)
                    continue
            if ok:
                for p, _, _, key in batch:
                    cache[os.path.abspath(p)] = key
                continue
            if not args.isolate:
                # Attribute errors by line number (the TU marks where each candidate starts); candidates
                # without errors stay unverified (not cached) and are compiled again on the next run.
                starts = []
                with open(os.path.join(wd, "batch.cu")) as f:
                    for ln, line in enumerate(f, 1):
                        if line.startswith("// ---- "):
                            starts.append(ln)
                for line in log.splitlines():
                    m = re.match(r".*batch\.cu\((\d+)\): (error.*)", line) or re.match(r".*batch\.cu:(\d+):\d*:? ?(error.*)", line)
                    if not m:
                        continue
                    ln = int(m.group(1))
                    idx = max((i for i, s0 in enumerate(starts) if s0 <= ln), default=None)
                    if idx is None:
                        continue
                    p = batch[idx][0]
                    failed[p] = (failed.get(p, "nvcc:") + f"\n    line {ln - starts[idx]}: {m.group(2)}")
                if not any(p in failed for p, *_ in batch):
                    print(log[-3000:])
                continue
            for p, c, d, key in batch:  # attribute the error by compiling one at a time
                ok1, log1, dt1 = compile_items([(p, c, d)], args.arch, wd)
                print(f"  {os.path.relpath(p)}: {'OK' if ok1 else 'FAILED'} ({dt1:.0f}s)", flush=True)
                if ok1:
                    cache[os.path.abspath(p)] = key
                else:
                    errs = [l for l in log1.splitlines() if "error" in l.lower()]
                    failed[p] = "nvcc: " + "\n    ".join(errs[:15] or log1.splitlines()[-15:])
            os.makedirs(os.path.dirname(CACHE), exist_ok=True)
            json.dump(cache, open(CACHE, "w"), indent=1)
    os.makedirs(os.path.dirname(CACHE), exist_ok=True)
    json.dump(cache, open(CACHE, "w"), indent=1)
    for p, why in sorted(failed.items()):
        print(f"FAIL {os.path.relpath(p)}\n    {why}")
    what = "passed python/lint (not compiled: --lint-only)" if args.lint_only else "passed (or cached as passed)"
    print(f"{len(files) - len(failed)}/{len(files)} {what}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
