"""`ast.parse` that is safe to call from several threads at once.

CPython before 3.12 keeps the AST constructor's recursion depth in interpreter-wide state, so two threads parsing at
the same moment can fail with "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905). The
verifier parses candidates and tasks in every verification thread (`verify-batch --workers N`, the RL pool, the
service), so every parse in the package goes through `parse`, which takes one process-wide lock.
"""

from __future__ import annotations

import ast
import threading

LOCK = threading.RLock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    with LOCK:
        return ast.parse(source, filename, mode)
