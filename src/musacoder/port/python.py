"""Translate a Python file (a KernelBench task or a CUDA candidate) to torch_musa, by the table in
`musacoder.port.mapping`.

Works on the token stream, so comments and ordinary strings are never rewritten:

- `torch.cuda.<name>` → `torch.musa.<name>` for the names torch_musa provides; any other `torch.cuda…` is reported;
- `<expr>.cuda(` → `<expr>.musa(`; `ProfilerActivity.CUDA` → `ProfilerActivity.MUSA`;
- device strings `"cuda"`, `"cuda:N"` (also an f-string starting `cuda:`) → `"musa"`, `"musa:N"`;
- `torch.utils.cpp_extension` → `torch_musa.utils.musa_extension` (only `load_inline`/`load` may be imported from
  it; other names are reported), and the builder's keywords `cuda_sources`, `extra_cuda_cflags`, `with_cuda`;
- string literals holding C++ (an `#include`, `__global__`, `torch::` …) go through `musacoder.port.cpp`;
- `import torch_musa` is added after `import torch` when the file now relies on it.

Afterwards, names still saying `cuda` (`torch.backends.cudnn`, `x.is_cuda`, …) are reported as unmapped, and compiler
flags in `extra_musa_cflags` other than the portable ones (`-O*`, `-D*`, `-U*`, `-I*`, `-std=*`, `-g`) too.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from musacoder.port.cpp import translate_cpp
from musacoder.port.mapping import BUILDER_FUNCTIONS, PYTHON_ATTRS, PYTHON_BUILDER
from musacoder.port.report import PortReport

_TORCH_CUDA = {e.cuda.split(".", 2)[2]: e for e in PYTHON_ATTRS if e.cuda.startswith("torch.cuda.")}
_KWARGS = {e.cuda: e for e in PYTHON_BUILDER if e.kind == "python-kwarg"}
_BUILDER = next(e for e in PYTHON_BUILDER if e.kind == "python-builder")
_DEVICE_STR = re.compile(r"^cuda(?=(?::\d+)?$)")
_FSTRING_DEVICE = re.compile(r"^cuda(?=:\{)")
_CPP_MARKERS = re.compile(r"#\s*include|__global__|__device__|torch::|TORCH_CHECK|at::Tensor|\bPYBIND11_MODULE")
_PORTABLE_FLAG = re.compile(r"^(?:-O\d?|-O[sz]|-D\S+|-U\S+|-I\S*|-std=\S+|-g|-w)$")
_IMPORT_TORCH_MUSA = "import torch_musa  # registers the torch.musa device (MUSA)"


def _string_parts(text: str) -> tuple[str, str, str] | None:
    """(prefix + opening quote, body, closing quote) of a string token's text."""
    m = re.match(r"^([rRbBuUfF]*)('''|\"\"\"|'|\")", text)
    if not m:
        return None
    head = m.group(0)
    quote = m.group(2)
    return head, text[len(head):len(text) - len(quote)], quote


class _Edits:
    def __init__(self, src: str):
        self.src = src
        starts = [0]
        for line in src.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        self.starts = starts
        self.edits: list[tuple[int, int, str]] = []

    def off(self, pos: tuple[int, int]) -> int:
        return self.starts[pos[0] - 1] + pos[1]

    def replace(self, tok: tokenize.TokenInfo, text: str) -> None:
        self.edits.append((self.off(tok.start), self.off(tok.end), text))

    def replace_span(self, first: tokenize.TokenInfo, last: tokenize.TokenInfo, text: str) -> None:
        self.edits.append((self.off(first.start), self.off(last.end), text))

    def apply(self) -> str:
        out = self.src
        for start, end, text in sorted(self.edits, reverse=True):
            out = out[:start] + text + out[end:]
        return out


def _significant(src: str) -> list[tokenize.TokenInfo]:
    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}
    return [t for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type not in skip]


def _is(tok: tokenize.TokenInfo | None, string: str) -> bool:
    return tok is not None and tok.string == string


def translate_python(src: str, report: PortReport | None = None) -> tuple[str, PortReport]:
    """The torch_musa version of the Python file `src` and what was mapped, left unmapped and kept."""
    report = report if report is not None else PortReport()
    toks = _significant(src)
    edits = _Edits(src)
    needs_torch_musa = False
    handled: set[int] = set()  # indices of `cuda`-ish NAME tokens already dealt with

    def at(i: int) -> tokenize.TokenInfo | None:
        return toks[i] if 0 <= i < len(toks) else None

    for i, tok in enumerate(toks):
        if tok.type == tokenize.NAME:
            # torch.cuda.<name>
            if tok.string == "cuda" and _is(at(i - 1), ".") and _is(at(i - 2), "torch"):
                handled.add(i)
                nxt = at(i + 2) if _is(at(i + 1), ".") else None
                if nxt is not None and nxt.type == tokenize.NAME and nxt.string in _TORCH_CUDA:
                    edits.replace(tok, "musa")
                    report.add(f"torch.cuda.{nxt.string}", f"torch.musa.{nxt.string}")
                    needs_torch_musa = True
                else:
                    report.unmapped.add("torch.cuda" + (f".{nxt.string}" if nxt is not None else ""))
            # <expr>.cuda(
            elif tok.string == "cuda" and _is(at(i - 1), ".") and _is(at(i + 1), "("):
                handled.add(i)
                edits.replace(tok, "musa")
                report.add(".cuda()", ".musa()")
                needs_torch_musa = True
            # ProfilerActivity.CUDA
            elif tok.string == "CUDA" and _is(at(i - 1), ".") and _is(at(i - 2), "ProfilerActivity"):
                handled.add(i)
                edits.replace(tok, "MUSA")
                report.add("ProfilerActivity.CUDA", "ProfilerActivity.MUSA")
                needs_torch_musa = True
            # torch.utils.cpp_extension
            elif (tok.string == "torch" and _is(at(i + 1), ".") and _is(at(i + 2), "utils")
                  and _is(at(i + 3), ".") and _is(at(i + 4), "cpp_extension")):
                edits.replace_span(tok, toks[i + 4], _BUILDER.musa)
                report.add(_BUILDER.cuda, _BUILDER.musa)
                needs_torch_musa = True
                handled.add(i + 4)
            # from torch.utils import cpp_extension
            elif (tok.string == "from" and _is(at(i + 1), "torch") and _is(at(i + 3), "utils")
                  and _is(at(i + 4), "import") and _is(at(i + 5), "cpp_extension")):
                edits.replace_span(toks[i + 1], toks[i + 3], "torch_musa.utils")
                alias = "" if _is(at(i + 6), "as") else " as cpp_extension"
                edits.replace(toks[i + 5], "musa_extension" + alias)
                report.add(_BUILDER.cuda, _BUILDER.musa)
                needs_torch_musa = True
                handled.add(i + 5)
            # builder keywords
            elif tok.string in _KWARGS and _is(at(i + 1), "=") and _is_call_kwarg(toks, i):
                e = _KWARGS[tok.string]
                edits.replace(tok, e.musa)
                report.add(e.cuda, e.musa)
                handled.add(i)
        elif tok.type == tokenize.STRING:
            _map_string(tok, edits, report)
            if tok.string.lstrip("rRbBuUfF")[:1] in "'\"" and _DEVICE_STR.match(
                    (_string_parts(tok.string) or ("", "", ""))[1]):
                needs_torch_musa = True

    for i, tok in enumerate(toks):  # what still says cuda
        if tok.type != tokenize.NAME or i in handled:
            continue
        low = tok.string.lower()
        if tok.string in ("cuda", "is_cuda", "cudnn", "CUDA") or low.startswith(("cuda_", "cudnn", "cublas")):
            if _is(at(i - 1), ".") or _is(at(i + 1), "."):  # an attribute chain: torch.backends.cudnn, x.is_cuda
                report.unmapped.add(_chain(toks, i))
            elif "cuda" in low and tok.string not in _KWARGS:
                report.kept.add(tok.string)
        elif "cuda" in low and tok.string not in _KWARGS:
            report.kept.add(tok.string)

    out = edits.apply()
    if needs_torch_musa:
        out = _add_import(out)
    _check_builder(out, report)
    return out, report


def _chain(toks: list[tokenize.TokenInfo], i: int) -> str:
    """The dotted name around token i (`torch.backends.cudnn.benchmark`)."""
    lo = i
    while lo >= 2 and toks[lo - 1].string == "." and toks[lo - 2].type == tokenize.NAME:
        lo -= 2
    hi = i
    while hi + 2 < len(toks) and toks[hi + 1].string == "." and toks[hi + 2].type == tokenize.NAME:
        hi += 2
    return "".join(t.string for t in toks[lo:hi + 1])


def _is_call_kwarg(toks: list[tokenize.TokenInfo], i: int) -> bool:
    prev = toks[i - 1].string if i > 0 else ""
    return prev in ("(", ",")


def _map_string(tok: tokenize.TokenInfo, edits: _Edits, report: PortReport) -> None:
    parts = _string_parts(tok.string)
    if parts is None:
        return
    head, body, quote = parts
    prefix = head.rstrip("'\"").lower()
    if "b" in prefix:
        return
    if "f" in prefix:
        if _FSTRING_DEVICE.match(body):
            edits.replace(tok, head + "musa" + body[4:] + quote)
            report.add('"cuda:N"', '"musa:N"')
        return
    if _DEVICE_STR.match(body):
        edits.replace(tok, head + "musa" + body[4:] + quote)
        report.add(f'"{body}"', f'"musa{body[4:]}"')
        return
    if _CPP_MARKERS.search(body):
        new_body, _ = translate_cpp(body, report)
        if new_body != body:
            edits.replace(tok, head + new_body + quote)


def _add_import(src: str) -> str:
    """Insert `import torch_musa` after the first top-level `import torch` (else before the first import)."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name == "torch_musa" for a in node.names):
            return src
    anchor = None
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name == "torch" or a.name.startswith("torch.") for a in node.names):
            anchor = ("after", node)
            break
    if anchor is None:
        first = next((n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                      and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")), None)
        if first is None:
            return _IMPORT_TORCH_MUSA + "\n" + src
        anchor = ("before", first)
    lines = src.splitlines(keepends=True)
    where, node = anchor
    idx = node.end_lineno if where == "after" else node.lineno - 1
    return "".join(lines[:idx]) + _IMPORT_TORCH_MUSA + "\n" + "".join(lines[idx:])


def _check_builder(src: str, report: PortReport) -> None:
    """Names imported from the builder other than `load_inline`/`load`, and compiler flags in
    `extra_musa_cflags=[…]` that are not portable between nvcc and mcc, are reported."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == _BUILDER.musa:
            for alias in node.names:
                if alias.name not in BUILDER_FUNCTIONS:
                    report.unmapped.add(f"{_BUILDER.cuda}.{alias.name}")
        if isinstance(node, ast.keyword) and node.arg == "extra_musa_cflags" and isinstance(node.value,
                                                                                           (ast.List, ast.Tuple)):
            for elt in node.value.elts:
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str) and not _PORTABLE_FLAG.match(elt.value):
                    report.unmapped.add(f"compiler flag {elt.value}")
