"""From a raw model response to candidate code.

Rules: drop `<think>…</think>` blocks (and an unclosed trailing `<think>`), then take the last fenced code block whose
language is Python (or unlabelled); if there is no fence, the whole text counts when it reads as code (it parses as
Python and defines `ModelNew`, or it mentions `class ModelNew` and then its syntax error is reported with its line).
The backend is inferred from what the code shows.

Every unusable response is an `extract_error` whose message says what to send instead, never an exception: a response
longer than `MAX_RESPONSE_CHARS`, binary data, prose, a Python block that does not parse, one without `ModelNew`.
The size limit keeps the parser's memory bounded (CPython's parser can run out of memory on tens of kilobytes of
prose); a real answer is far below it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from musacoder import syntax
from musacoder.records import Candidate

# The longest response judged, in characters (and, read from a file, in bytes): ten times a long kernel answer with
# its reasoning. Anything longer is an extract_error before any parsing.
MAX_RESPONSE_CHARS = 200_000

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_OPEN_THINK = re.compile(r"<think>.*\Z", re.DOTALL | re.IGNORECASE)
_STRAY_CLOSE = re.compile(r"\A.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)
_PY_LANGS = {"", "python", "py", "python3"}
# control characters that never occur in text: NUL, the other C0 codes but tab/newline/CR/form feed, and the
# replacement character undecodable bytes became
_BINARY = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\ufffd]")
_CODE_SHAPED = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
_NO_CODE = "no code found: answer with one ```python block that defines class ModelNew(nn.Module)"


def read_response(path: str | Path) -> str:
    """A response file as text: UTF-8, undecodable bytes kept as U+FFFD (so `extract_code` reports binary data), and
    at most `MAX_RESPONSE_CHARS` + 1 bytes read (so a huge file is reported as too long without being read whole).
    Raises OSError where the file cannot be read."""
    with open(path, "rb") as f:
        data = f.read(MAX_RESPONSE_CHARS + 1)
    return data.decode("utf-8", errors="replace")


def strip_think(text: str) -> str:
    """Remove reasoning blocks: every `<think>…</think>`, a leading `…</think>` (template opened it), and an
    unterminated trailing `<think>…`."""
    text = _THINK.sub("", text)
    if "</think>" in text.lower():
        text = _STRAY_CLOSE.sub("", text)
    return _OPEN_THINK.sub("", text)


def infer_backend(code: str) -> str | None:
    """The backend the code shows: Triton JIT kernels, MUSA sources (torch_musa), CUDA sources passed to
    load_inline (or `.cu` files passed to cpp_extension.load), or C++ only."""
    if re.search(r"@\s*triton\.jit|\btriton\.jit\b|from\s+triton\b|import\s+triton\b", code):
        return "triton"
    if re.search(r"\bmusa_sources\s*=|\bimport\s+torch_musa\b|\bfrom\s+torch_musa\b", code):
        return "musa"
    if re.search(r"\bcuda_sources\s*=", code) or "__global__" in code or re.search(r"\.cu['\"]", code):
        return "cuda"
    if re.search(r"\bload_inline\s*\(", code) or re.search(r"\bcpp_sources\s*=", code) \
            or re.search(r"\bcpp_extension\.load\s*\(|\bload\s*\(\s*name\s*=", code):
        return "cpu"
    return None


def _parse(code: str) -> ast.AST:
    """`syntax.parse`, with the parser's own failures on pathological input (out of memory, too deep) turned into a
    SyntaxError, so that they are the candidate's extract error and never the verifier's."""
    try:
        return syntax.parse(code)
    except (MemoryError, RecursionError) as e:
        raise SyntaxError(f"the parser gave up ({type(e).__name__}): the text is not a program it can read") from e


def _class_names(tree: ast.AST) -> list[str]:
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def _reads_as_code(text: str) -> bool:
    """Whether unfenced text is a program: it parses and defines or imports something (prose never parses so)."""
    try:
        tree = _parse(text)
    except SyntaxError:
        return False
    return any(isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.Import, ast.ImportFrom)) for n in ast.walk(tree))


def _error(msg: str) -> Candidate:
    return Candidate(code=None, extract_error=msg)


def _pick_code(body: str) -> tuple[str | None, str | None, str]:
    """(code, error, where): the text to judge, or the reason there is none; `where` names it for messages."""
    blocks = [(lang.lower(), code) for _, lang, code in _FENCE.findall(body)]
    py_blocks = [code for lang, code in blocks if lang in _PY_LANGS]
    if py_blocks:
        return py_blocks[-1], None, "the last Python block" if len(py_blocks) > 1 else "the Python block"
    if blocks:
        langs = sorted({lang or "unlabelled" for lang, _ in blocks})
        return None, (f"found fenced blocks only in {', '.join(langs)}; expected one ```python block defining "
                      "ModelNew (put C++/CUDA sources inside it as strings passed to load_inline)"), ""
    if "```" in body:
        return None, "unterminated ``` code fence: close the Python block", ""
    if _CODE_SHAPED.search(body) or _reads_as_code(body):
        return body, None, "the code"
    return None, _NO_CODE, ""


def extract_code(response: str) -> Candidate:
    """Extract the candidate program from a raw response; `extract_error` says why when nothing usable is found."""
    if response is None or not response.strip():
        return _error("empty response: expected a Python code block defining ModelNew")
    if len(response) > MAX_RESPONSE_CHARS:
        return _error(f"the response is longer than {MAX_RESPONSE_CHARS} characters (the limit); answer with one "
                      "```python block that defines ModelNew and keep the reasoning shorter")
    if m := _BINARY.search(response):
        return _error(f"the response contains binary data (character {m.group(0)!r} at offset {m.start()}); expected "
                      "text with one ```python block defining ModelNew")
    code, err, where = _pick_code(strip_think(response))
    if code is None:
        return _error(err)
    code = code.strip("\n") + "\n"
    try:
        tree = _parse(code)
    except SyntaxError as e:
        return _error(f"{where} does not parse: line {e.lineno}: {e.msg}")
    classes = _class_names(tree)
    if "ModelNew" not in classes:
        found = f" (it defines {', '.join(classes[:5])})" if classes else ""
        return _error(f"{where} does not define class ModelNew{found}; the verifier instantiates ModelNew")
    return Candidate(code=code, backend=infer_backend(code))
