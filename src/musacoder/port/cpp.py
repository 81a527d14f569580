"""Translate CUDA C++ (a torch extension's sources) to MUSA names, by the table in `musacoder.port.mapping`.

Only code is rewritten: string literals and comments are left alone (an error message saying "CUDA tensor" stays).
`#include` targets, namespace-qualified ATen/c10 helpers, plain identifiers and the `.is_cuda()` member are mapped
on identifier boundaries (so `relu_cuda` is never touched). Afterwards the code is scanned for names that still look
like CUDA API (`cuda*`, `cublas*`, `CUBLAS_*`, `C10_CUDA_*`, `at::cuda::*`, `__nv_*`, CUDA headers, …): those are
reported as unmapped; other names containing "cuda" are user names, reported as kept.
"""

from __future__ import annotations

import re

from musacoder.port.mapping import MEMBERS, cpp_table, header_table
from musacoder.port.report import PortReport

# Comments, string and character literals (kept verbatim); everything between them is code.
_NON_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|R"(?P<d>[^(\s]*)\(.*?\)(?P=d)"|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                       re.S)
_INCLUDE = re.compile(r'^(?P<lead>[ \t]*#[ \t]*include[ \t]*)(?P<target><[^>\n]+>|"[^"\n]+")', re.M)
_NAME = re.compile(r"(?<![\w:])(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
_MEMBER = re.compile(r"(?P<op>\.|->)(?P<ws>\s*)(?P<name>\w+)(?=\s*\()")
_API_LIKE = re.compile(
    r"^(?:cuda[A-Z]\w*|cu(?:blas|blasLt|dnn|rand|fft|sparse|solver)\w*|CU(?:BLAS|DNN|RAND|FFT|SPARSE|DA)_\w+"
    r"|(?:C10|AT|TORCH)_CUDA\w*|__CUDA\w*|__nv_\w+|nv_bfloat16\w*|nvcuda|is_cuda|kCUDA)$")
_CUDA_HEADER = re.compile(r"cuda|cublas|cudnn|curand|cufft|cusparse|cusolver|\bcub/|\bnv|mma\.h|cooperative_groups",
                          re.I)
_USER_DEF = re.compile(r"#\s*define\s+(\w+)|\b(\w+)\s*\([^;{}()]*(?:\([^()]*\)[^;{}()]*)*\)\s*(?:const\s*)?\{")

_TABLE = cpp_table()
_HEADERS = header_table()
_MEMBER_MAP = {e.cuda: e for e in MEMBERS}


def _segments(src: str):
    """(is_code, text) pieces of `src` in order."""
    pos = 0
    for m in _NON_CODE.finditer(src):
        if m.start() > pos:
            yield True, src[pos:m.start()]
        yield False, m.group(0)
        pos = m.end()
    if pos < len(src):
        yield True, src[pos:]


def _map_include(m: re.Match, report: PortReport) -> str:
    target = m.group("target")
    key = target if target.startswith("<") else f"<{target[1:-1]}>"
    entry = _HEADERS.get(key)
    if entry is not None:
        report.add(entry.cuda, entry.musa)
        return m.group("lead") + entry.musa
    if _CUDA_HEADER.search(target[1:-1]) and "torch_musa" not in target and "musa" not in target:
        report.unmapped.add(f"#include {target}")
    return m.group(0)


def _map_code(code: str, report: PortReport) -> str:
    def name(m: re.Match) -> str:
        text = m.group(0)
        lead = "::" if text.startswith("::") else ""
        parts = text[len(lead):].split("::")
        for i in range(len(parts), 0, -1):  # the longest qualified prefix the table knows
            entry = _TABLE.get("::".join(parts[:i]))
            if entry is not None:
                report.add(entry.cuda, entry.musa)
                return lead + "::".join([entry.musa] + parts[i:])
        if len(parts) > 1 and "cuda" not in parts[:-1] and parts[-1] in _TABLE:  # e.g. std::vector<…>::cudaStream_t
            entry = _TABLE[parts[-1]]
            report.add(entry.cuda, entry.musa)
            return lead + "::".join(parts[:-1] + [entry.musa])
        return text

    def member(m: re.Match) -> str:
        entry = _MEMBER_MAP.get(m.group("name"))
        if entry is None:
            return m.group(0)
        report.add(f".{entry.cuda}()", f".{entry.musa}()")
        return m.group("op") + m.group("ws") + entry.musa

    code = _MEMBER.sub(member, code)
    return _NAME.sub(name, code)


def _user_names(src: str) -> set[str]:
    names = set()
    for m in _USER_DEF.finditer(src):
        names.add(m.group(1) or m.group(2))
    return names


def _scan(code_text: str, user: set[str], report: PortReport) -> None:
    for m in _NAME.finditer(code_text):
        text = m.group(0).lstrip(":")
        parts = text.split("::")
        if len(parts) > 1 and "cuda" in parts[:-1]:  # at::cuda::X, c10::cuda::X, cuda::std::X
            report.unmapped.add(text)
            continue
        last = parts[-1]
        if "cuda" not in last.lower() and not _API_LIKE.match(last):
            continue
        if _API_LIKE.match(last) and last not in user:
            report.unmapped.add(text)
        else:
            report.kept.add(last)
    for m in _MEMBER.finditer(code_text):
        if m.group("name") in _MEMBER_MAP:
            report.unmapped.add(f".{m.group('name')}()")


def translate_cpp(src: str, report: PortReport | None = None) -> tuple[str, PortReport]:
    """The MUSA version of the CUDA C++ `src` and what was mapped, left unmapped and kept."""
    report = report if report is not None else PortReport()
    src = _INCLUDE.sub(lambda m: _map_include(m, report), src)
    out = []
    for is_code, text in _segments(src):
        if is_code:
            out.append(_map_code_skip_includes(text, report))
        else:
            out.append(text)
    result = "".join(out)
    user = _user_names(result)
    code_only = "".join(t for is_code, t in _segments(result) if is_code)
    code_only = _INCLUDE.sub("", code_only)
    _scan(code_only, user, report)
    return result, report


def _map_code_skip_includes(code: str, report: PortReport) -> str:
    """Map a code segment, leaving `#include <…>` lines (already handled) untouched."""
    pieces, pos = [], 0
    for m in _INCLUDE.finditer(code):
        pieces.append(_map_code(code[pos:m.start()], report))
        pieces.append(m.group(0))
        pos = m.end()
    pieces.append(_map_code(code[pos:], report))
    return "".join(pieces)


# MUSA spellings read back as CUDA ones, for rules written against CUDA names (the legality patterns): the table's
# MUSA names plus the family prefixes (musaXxx, mublas*, mudnn*, …) so names outside the table are covered too.
_MUSA_BACK = [(re.compile(r"\b(c10|at)::musa::"), r"at::cuda::"), (re.compile(r"\bmusa([A-Z]\w*)"), r"cuda\1"),
              (re.compile(r"\bmu(blas|blasLt|dnn|sparse|fft|solver|rand)"), r"cu\1"),
              (re.compile(r"\bMU(BLAS|DNN|SPARSE|FFT|RAND)_"), r"CU\1_"),
              (re.compile(r"\b(C10|AT|TORCH)_MUSA_"), r"\1_CUDA_"), (re.compile(r"MUSA(Stream|Guard|Event|Graph)"), r"CUDA\1"),
              (re.compile(r"\b(getCurrent|getDefault|setCurrent)MUSA"), r"\1CUDA")]


def musa_names_as_cuda(src: str) -> str:
    """`src` with MUSA API names spelled as their CUDA counterparts (`musaMalloc` → `cudaMalloc`,
    `c10::musa::MUSAStreamGuard` → `at::cuda::CUDAStreamGuard`, `mublasSgemm` → `cublasSgemm`), so checks written
    for CUDA sources apply to MUSA sources too. Not a translation: the result is only ever matched, never built."""
    for pattern, repl in _MUSA_BACK:
        src = pattern.sub(repl, src)
    return src
