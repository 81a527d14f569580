"""From a raw model response to candidate code.

Rules: drop `<think>…</think>` blocks (and an unclosed trailing `<think>`), then take the last fenced code block whose
language is Python (or unlabelled); if there is no fence, the whole text counts when it parses as Python and defines
`ModelNew`. The backend is inferred from what the code shows.
"""

from __future__ import annotations

import ast
import re

from musacoder import syntax
from musacoder.records import Candidate

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"<think>.*\Z", re.DOTALL | re.IGNORECASE)
_STRAY_CLOSE = re.compile(r"\A.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)
_PY_LANGS = {"", "python", "py", "python3"}


def strip_think(text: str) -> str:
    """Remove reasoning blocks: every `<think>…</think>`, a leading `…</think>` (template opened it), and an
    unterminated trailing `<think>…`."""
    text = _THINK.sub("", text)
    if "</think>" in text.lower():
        text = _STRAY_CLOSE.sub("", text)
    return _OPEN_THINK.sub("", text)


def infer_backend(code: str) -> str | None:
    """The backend the code shows: Triton JIT kernels, MUSA sources (torch_musa), CUDA sources passed to
    load_inline, or C++ only."""
    if re.search(r"@\s*triton\.jit|\btriton\.jit\b|from\s+triton\b|import\s+triton\b", code):
        return "triton"
    if re.search(r"\bmusa_sources\s*=|\bimport\s+torch_musa\b|\bfrom\s+torch_musa\b", code):
        return "musa"
    if re.search(r"\bcuda_sources\s*=", code) or "__global__" in code:
        return "cuda"
    if re.search(r"\bload_inline\s*\(", code) or re.search(r"\bcpp_sources\s*=", code):
        return "cpu"
    return None


def _is_python_with_modelnew(code: str) -> bool:
    try:
        tree = syntax.parse(code)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in ast.walk(tree))


def extract_code(response: str) -> Candidate:
    """Extract the candidate program from a raw response; `extract_error` says why when nothing usable is found."""
    if response is None or not response.strip():
        return Candidate(code=None, extract_error="empty response: expected a Python code block defining ModelNew")
    body = strip_think(response)
    blocks = [(lang.lower(), code) for _, lang, code in _FENCE.findall(body)]
    py_blocks = [code for lang, code in blocks if lang in _PY_LANGS]
    if py_blocks:
        code = py_blocks[-1]
    elif blocks:
        langs = sorted({lang or "unlabelled" for lang, _ in blocks})
        return Candidate(
            code=None,
            extract_error=f"found fenced blocks only in {', '.join(langs)}; expected one ```python block defining "
            "ModelNew (put C++/CUDA sources inside it as strings passed to load_inline)",
        )
    elif "```" in body:
        return Candidate(code=None, extract_error="unterminated ``` code fence: close the Python block")
    elif _is_python_with_modelnew(body):
        code = body
    else:
        return Candidate(
            code=None,
            extract_error="no code found: answer with one ```python block that defines class ModelNew(nn.Module)",
        )
    code = code.strip("\n") + "\n"
    try:
        syntax.parse(code)
    except SyntaxError as e:
        return Candidate(code=None, extract_error=f"the last Python block does not parse: line {e.lineno}: {e.msg}")
    if not _is_python_with_modelnew(code):
        return Candidate(code=None, extract_error="the last Python block does not define class ModelNew")
    return Candidate(code=code, backend=infer_backend(code))
