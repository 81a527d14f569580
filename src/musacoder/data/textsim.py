"""Text similarity of task sources after normalisation (pure).

`normalise_source` removes what a copy can change without changing the program: comments, docstrings, formatting
(the AST is unparsed), import order and aliases (`F` → `torch.nn.functional`), the order of top-level definitions,
the names of everything the file defines (classes, functions, arguments, variables, `self.` attributes, renamed to
`n0, n1, …` in order of first use) and literal values (numbers → `0`, strings → `'s'`), so a copy with other size
constants reads the same. Similarity is the Jaccard index of the sets of token 5-grams (`shingles`).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import re

SHINGLE = 5  # tokens per shingle
KEEP_NAMES = frozenset({"forward", "self", "get_inputs", "get_init_inputs"})  # contract names, never renamed
_BUILTINS = frozenset(dir(builtins))
_TOKEN = re.compile(r"\w+|[^\w\s]")


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]


def _import_aliases(tree: ast.Module) -> dict[str, str]:
    """Local name → dotted module path for every import (`F` → `torch.nn.functional`, `nn` → `torch.nn`)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _defined_names(tree: ast.Module, aliases: dict[str, str]) -> dict[str, str]:
    """Names the file defines → canonical `n<k>` in order of first appearance (walk order is deterministic)."""
    mapping: dict[str, str] = {}

    def add(name: str) -> None:
        if name not in mapping and name not in KEEP_NAMES and not name.startswith("__") and name not in aliases:
            mapping[name] = f"n{len(mapping)}"

    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            add(node.name)
        elif isinstance(node, ast.arg):
            add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                and isinstance(node.value, ast.Name) and node.value.id == "self":
            add(node.attr)
    return mapping


class _Canon(ast.NodeTransformer):
    def __init__(self, names: dict[str, str], aliases: dict[str, str]):
        self.names, self.aliases = names, aliases

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names:
            node.id = self.names[node.id]
        elif node.id in self.aliases:
            node.id = self.aliases[node.id]
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.names.get(node.arg, node.arg)
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self.names.get(node.name, node.name)
        node.returns = None
        self.generic_visit(node)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self.names.get(node.name, node.name)
        self.generic_visit(node)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            node.attr = self.names.get(node.attr, node.attr)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super":
            node.args = []  # super(Model, self) == super()
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, bool) or node.value is None:
            return node
        if isinstance(node.value, (int, float, complex)):
            return ast.copy_location(ast.Constant(0), node)
        if isinstance(node.value, str):
            return ast.copy_location(ast.Constant("s"), node)
        return node


def _order(tree: ast.Module) -> None:
    """Top-level statements grouped: imports (sorted), classes, functions, other statements (each in file order)."""
    imports = sorted((n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))), key=ast.unparse)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    funcs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    rest = [n for n in tree.body if n not in imports and n not in classes and n not in funcs]
    tree.body = [*imports, *classes, *funcs, *rest]


def normalise_source(source: str) -> str:
    """The canonical text of a task source (see the module docstring). Raises SyntaxError for invalid Python."""
    tree = ast.parse(source)
    _strip_docstrings(tree)
    _order(tree)
    aliases = _import_aliases(tree)
    names = _defined_names(tree, aliases)
    tree = _Canon(names, aliases).visit(tree)
    return ast.unparse(ast.fix_missing_locations(tree))


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def shingles(toks: list[str], k: int = SHINGLE) -> frozenset[int]:
    """Hashed k-grams of a token list (one shingle of the whole list when it is shorter than k)."""
    grams = [" ".join(toks[i:i + k]) for i in range(max(1, len(toks) - k + 1))]
    return frozenset(int.from_bytes(hashlib.blake2b(g.encode(), digest_size=8).digest(), "little") for g in grams)


def source_shingles(source: str) -> frozenset[int]:
    """Shingles of the normalised source; of the raw tokens when the source does not parse."""
    try:
        text = normalise_source(source)
    except (SyntaxError, ValueError, RecursionError):
        text = source
    return shingles(tokens(text))


def jaccard(a: frozenset, b: frozenset) -> float:
    """|a ∩ b| / |a ∪ b|, and 0 for two empty sets."""
    if not a and not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)
