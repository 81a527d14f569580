"""A `TaskSpec` as the text of a KernelBench-format problem file (pure)."""

from __future__ import annotations

import re

from musacoder.data.records import TaskSpec


def bind_forward_constants(spec: TaskSpec) -> TaskSpec:
    """Constants that `forward` reads become `Model.__init__` arguments kept on `self` (KernelBench's habit), so the
    forward path reads no module globals and `get_init_inputs()` carries every scalar the model needs."""
    init_args, init_lines, forward = list(spec.init_args), list(spec.init_lines), list(spec.forward_lines)
    for name in spec.constants:
        pattern = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)(?!\s*=(?!=))")  # not a keyword name
        if not any(pattern.search(line) for line in forward):
            continue
        if name not in init_args:
            init_args.append(name)
        init_lines.append(f"self.{name} = {name}")
        forward = [pattern.sub(f"self.{name}", line) for line in forward]
    return spec.model_copy(update={"init_args": init_args, "init_lines": init_lines, "forward_lines": forward})


def _literal(value) -> str:
    if isinstance(value, tuple):
        inner = ", ".join(v if isinstance(v, str) else repr(v) for v in value)  # strings are expressions
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def _body(lines: list[str], indent: str) -> str:
    return "\n".join(indent + line for line in lines) if lines else indent + "pass"


def render_task(spec: TaskSpec) -> str:
    """The problem file: imports, `class Model`, size constants, `get_inputs()`, `get_init_inputs()`.

    String elements of tuple constants are expressions over earlier constants (`bias_shape = (out_features, 1, 1)`),
    written as such, so an override of a size (`--set out_features=7`) carries through.
    """
    spec = bind_forward_constants(spec)
    args = "".join(f", {a}" for a in spec.init_args)
    doc = spec.doc.replace('"""', "'''")
    init = _body(["super().__init__()", *spec.init_lines], " " * 8)
    forward = _body(spec.forward_lines, " " * 8)
    consts = "\n".join(f"{k} = {_literal(v)}" for k, v in spec.constants.items())
    init_inputs = ", ".join(spec.init_args)
    return (
        "\n".join(spec.imports) + "\n\n\n"
        "class Model(nn.Module):\n"
        f'    """{doc}"""\n\n'
        f"    def __init__(self{args}):\n{init}\n\n"
        f"    def forward(self, {', '.join(spec.forward_args)}):\n{forward}\n\n\n"
        f"{consts}\n\n\n"
        f"def get_inputs():\n{_body(spec.input_lines, ' ' * 4)}\n\n\n"
        f"def get_init_inputs():\n    return [{init_inputs}]\n"
    )
