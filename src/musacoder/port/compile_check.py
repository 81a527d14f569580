"""Compile a ported (MUSA) candidate's sources with nvcc through the shim include directory.

The ported `musa_sources` and `cpp_sources` of every `load_inline` call go into one translation unit, after the
prelude torch_musa's `load_inline` puts in front of them (torch's headers, `musa.h`, `musa_runtime.h`). The shim
(`musacoder.port.shim`) resolves those MUSA headers and names to CUDA. With `poison=True` every CUDA name of the
mapping table that is not a macro, and the `cuda` namespace itself, is `#pragma GCC poison`-ed after the sources' own `#include` lines:
a CUDA name the port left in the code is then a compile error, while MUSA names (macros defined before the poison)
still expand to CUDA. So a pass means the sources use MUSA names only and those names line up with the CUDA API.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from musacoder.port.mapping import HEADERS, IDENTIFIERS, QUALIFIED
from musacoder.port.shim import INCLUDE_DIR

PRELUDE = "#include <torch/extension.h>\n#include <musa.h>\n#include <musa_runtime.h>\n"
# CUDA names that are macros: poisoning a macro undefines it for nvcc's front end, so the MUSA macro defined on top
# of it would stop expanding. These are left to the translator's scan (`musacoder.port.cpp`) instead.
_CUDA_MACROS = {"C10_CUDA_KERNEL_LAUNCH_CHECK", "C10_CUDA_CHECK", "AT_CUDA_CHECK", "__CUDA_ARCH__", "__CUDACC__",
                "__NVCC__", "CUDART_VERSION", "cudaStreamDefault"}
_INCLUDE_LINE = re.compile(r"^\s*#\s*(?:include|pragma\s+once)\b.*$", re.M)


@dataclass
class CompileResult:
    ok: bool
    seconds: float
    log: str
    command: list[str]


class SourceError(ValueError):
    """The candidate's sources could not be found statically."""


def _module_strings(tree: ast.Module) -> dict[str, str]:
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError):
                continue
            if isinstance(value, str):
                found[node.targets[0].id] = value
    return found


def _resolve(node: ast.AST, strings: dict[str, str], where: str) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in strings:
        return [strings[node.id]]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for elt in node.elts for s in _resolve(elt, strings, where)]
    raise SourceError(f"{where}: a load_inline source is not a string constant ({ast.unparse(node)})")


def extract_sources(text: str, where: str = "<candidate>") -> tuple[list[str], list[str]]:
    """(cpp_sources, musa_sources) of every `load_inline(...)` call in a ported candidate, read statically."""
    tree = ast.parse(text, filename=where)
    strings = _module_strings(tree)
    cpp, musa = [], []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "load_inline"):
            continue
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        if len(node.args) > 1:
            kwargs.setdefault("cpp_sources", node.args[1])
        if len(node.args) > 2:
            kwargs.setdefault("musa_sources", node.args[2])
        if "cpp_sources" in kwargs:
            cpp += _resolve(kwargs["cpp_sources"], strings, where)
        if "musa_sources" in kwargs:
            musa += _resolve(kwargs["musa_sources"], strings, where)
    if not musa:
        raise SourceError(f"{where}: no load_inline(..., musa_sources=...) found (is the file ported?)")
    return cpp, musa


def poison_pragma() -> str:
    """`#pragma GCC poison` for every CUDA name of the table (plain identifiers and the `cuda` namespace)."""
    names = {e.cuda for e in IDENTIFIERS} - _CUDA_MACROS
    for e in QUALIFIED:  # the CUDA-only parts (getCurrentDeviceProperties keeps its name in at::musa)
        names |= set(e.cuda.split("::")) - set(e.musa.split("::")) - {"at", "c10", "torch"}
    names.add("cuda")
    return "#pragma GCC poison " + " ".join(sorted(names)) + "\n"


def translation_unit(cpp: list[str], musa: list[str], poison: bool = True) -> str:
    """One `.cu` file: prelude, the MUSA sources (the poison after their include lines), then the C++ sources
    (declarations, checked against the definitions)."""
    body = "\n".join(musa)
    if poison:
        last = None
        for m in _INCLUDE_LINE.finditer(body):
            last = m
        cut = last.end() if last else 0
        body = body[:cut] + "\n" + poison_pragma() + body[cut:]
    return PRELUDE + "\n" + body + "\n\n// cpp_sources\n" + "\n".join(cpp) + "\n"


def nvcc_command(cu: Path, obj: Path, arch: str = "sm_90", std: str = "c++20") -> list[str]:
    import torch.utils.cpp_extension as ce

    try:
        incs = list(ce.include_paths(device_type="cuda"))
    except TypeError:  # older torch
        incs = list(ce.include_paths(cuda=True))
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    incs = [str(INCLUDE_DIR)] + incs + [os.path.join(cuda_home, "include"), sysconfig.get_paths()["include"]]
    if not _has_cuda_library_headers(cuda_home):
        # no cuSPARSE/cuBLAS headers here: MooreEval's light ATen/cuda stand-ins (its first build attempt) instead
        from musacoder.build.cache import LITE_INCLUDE

        incs.insert(1, str(LITE_INCLUDE))
    flags = list(ce.COMMON_NVCC_FLAGS) + ["-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=musa_port_check",
                                          "-D_GLIBCXX_USE_CXX11_ABI=1"]
    return ([os.path.join(cuda_home, "bin", "nvcc"), "-c", str(cu), "-o", str(obj), f"-arch={arch}", f"-std={std}",
             "-O0", "-w", "--threads", "1"] + flags + [f"-I{p}" for p in incs])


def _has_cuda_library_headers(cuda_home: str) -> bool:
    return Path(cuda_home, "include", "cusparse.h").is_file()


def nvcc_available() -> bool:
    return Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc").is_file()


def compile_ported(text: str, where: str = "<candidate>", arch: str = "sm_90", poison: bool = True,
                   workdir: Path | None = None) -> CompileResult:
    """Compile the ported candidate `text` with nvcc through the shim (see the module docstring)."""
    cpp, musa = extract_sources(text, where)
    with tempfile.TemporaryDirectory(prefix="musa_port_", dir=workdir) as tmp:
        cu = Path(tmp) / "ported.cu"
        cu.write_text(translation_unit(cpp, musa, poison))
        cmd = nvcc_command(cu, cu.with_suffix(".o"), arch)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        return CompileResult(r.returncode == 0, time.perf_counter() - t0, (r.stdout + r.stderr)[-8000:], cmd)


_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)", re.M)
_ERROR_LINE = re.compile(r"ported\.cu(?:\((\d+)\)|:(\d+):)")


def batch_unit(items: list[tuple[list[str], list[str]]], poison: bool = True) -> tuple[str, list[int]]:
    """One `.cu` file for several ported candidates (`(cpp, musa)` each) and the line where each one's code starts:
    every `#include` hoisted to the top (then the poison, as for one candidate), each candidate's code in a
    namespace of its own, and the macros it defines undefined after it, so the candidates cannot see one another."""
    includes: list[str] = []
    chunks: list[str] = []
    for i, (cpp, musa) in enumerate(items):
        text = "\n".join(musa) + "\n\n// cpp_sources\n" + "\n".join(cpp)
        body = []
        for line in text.splitlines():
            if _INCLUDE_LINE.match(line):
                if line.strip() not in includes and "pragma" not in line:
                    includes.append(line.strip())
            else:
                body.append(line)
        undefs = "".join(f"#undef {m}\n" for m in dict.fromkeys(_DEFINE.findall(text)))
        chunks.append(f"namespace musa_port_{i} {{\n" + "\n".join(body) + f"\n}}  // namespace musa_port_{i}\n{undefs}")
    head = PRELUDE + "\n".join(includes) + "\n" + (poison_pragma() if poison else "") + "\n"
    starts, line = [], head.count("\n") + 1
    for chunk in chunks:
        starts.append(line)
        line += chunk.count("\n")
    return head + "".join(chunks), starts


def compile_ported_many(items: list[tuple[str, str]], arch: str = "sm_90", batch: int = 12, poison: bool = True,
                        progress=None) -> dict[str, CompileResult]:
    """Compile many ported candidates (`(where, text)` each), `batch` to one translation unit: parsing torch's
    headers is most of a compile, so a batch costs little more than one candidate. A batch that fails is not held
    against its candidates: the ones nvcc's errors point at, or all of them if it names none, are compiled alone
    (`compile_ported`), and only that decides. Every candidate of a batch that compiled gets the batch's result
    (its `seconds` the batch's share). `progress(done, total)` is called after each batch."""
    out: dict[str, CompileResult] = {}
    for b in range(0, len(items), max(1, batch)):
        group = items[b:b + max(1, batch)]
        parsed = []
        for where, text in group:
            try:
                parsed.append((where, text, *extract_sources(text, where)))
            except SourceError as e:
                out[where] = CompileResult(False, 0.0, f"sources could not be read: {e}", [])
        if parsed:
            unit, starts = batch_unit([(cpp, musa) for _, _, cpp, musa in parsed], poison)
            with tempfile.TemporaryDirectory(prefix="musa_port_") as tmp:
                cu = Path(tmp) / "ported.cu"
                cu.write_text(unit)
                cmd = nvcc_command(cu, cu.with_suffix(".o"), arch)
                t0 = time.perf_counter()
                r = subprocess.run(cmd, capture_output=True, text=True)
                seconds = time.perf_counter() - t0
            if r.returncode == 0:
                for where, *_ in parsed:
                    out[where] = CompileResult(True, seconds / len(parsed), "", cmd)
            else:
                lines = [int(a or b_) for a, b_ in _ERROR_LINE.findall(r.stdout + r.stderr)]
                blamed = {max((i for i, s0 in enumerate(starts) if s0 <= n), default=-1) for n in lines} - {-1}
                for i, (where, text, *_) in enumerate(parsed):
                    if blamed and i not in blamed:
                        out[where] = None  # compiled again below with the next batch's leftovers
                    else:
                        out[where] = compile_ported(text, where, arch, poison)
                retry = [(w, t) for w, t, *_ in parsed if out[w] is None]
                if retry:
                    out.update(compile_ported_many(retry, arch, batch, poison))
        if progress:
            progress(min(b + len(group), len(items)), len(items))
    return out


def _main(argv: list[str]) -> int:
    """`python -m musacoder.port.compile_check PORTED.py …`: compile each, print ok/failed."""
    bad = 0
    for path in argv:
        res = compile_ported(Path(path).read_text(), path)
        print(f"{'ok' if res.ok else 'FAILED'} {path} ({res.seconds:.0f} s)")
        if not res.ok:
            bad += 1
            print(res.log)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))


__all__ = ["CompileResult", "SourceError", "compile_ported", "compile_ported_many", "extract_sources", "nvcc_available",
           "HEADERS"]
