"""Typed records of the data stages: a task spec before rendering, its execution check, a manifest row, a
decontamination row."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Kind = Literal["catalogue", "graph", "block"]
ConstantValue = int | float | bool | str | tuple


class TaskSpec(BaseModel):
    """A synthesised task before it becomes a KernelBench-format file (`musacoder.data.render.render_task`).

    `constants` are the module-level size constants in order; `init_args` names the ones passed to `Model.__init__`
    (KernelBench's `get_init_inputs()`); the `*_lines` are Python statements of each body, without indentation.
    """

    name: str  # CamelCase-ish title used in the file name, e.g. "Linear_BiasAdd_GELU_Sum"
    family: str  # op family of the catalogue entry ("activation", "gemm", …), "graph" or "block"
    kind: Kind
    variant: str = "base"  # base, odd, noncontig, broadcast, fp16, bf16 (catalogue); graph: "dag" or "chain"
    doc: str = ""
    imports: list[str] = Field(default_factory=lambda: ["import torch", "import torch.nn as nn",
                                                         "import torch.nn.functional as F"])
    constants: dict[str, ConstantValue] = Field(default_factory=dict)
    init_args: list[str] = Field(default_factory=list)
    init_lines: list[str] = Field(default_factory=list)
    forward_args: list[str] = Field(default_factory=lambda: ["x"])
    forward_lines: list[str] = Field(default_factory=list)
    input_lines: list[str] = Field(default_factory=list)  # body of get_inputs(), ending with `return [...]`
    ops: list[str] = Field(default_factory=list)  # the op chain, e.g. ["linear", "add", "gelu", "sum"]
    dtype: str = "float32"
    out_shape: list[int] | None = None  # the output shape shape inference predicts (graphs)


class TaskCheck(BaseModel):
    """What executing a candidate task showed (`musacoder.data.check.check_task`). `reason` is empty when kept."""

    kept: bool
    reason: str = ""
    input_shapes: list[list[int]] = Field(default_factory=list)
    output_shapes: list[list[int]] = Field(default_factory=list)
    forward_ms: float | None = None
    footprint_bytes: int | None = None  # inputs + outputs + parameters and buffers


class ManifestRow(BaseModel):
    """One line of `manifest.jsonl`: one candidate task, kept or rejected."""

    file: str  # file name in the output folder (written only when kept)
    index: int  # candidate number under the run's seed; the candidate is a pure function of (seed, index, scale)
    family: str
    kind: Kind
    variant: str
    kept: bool
    reason: str = ""  # why it was rejected ("" when kept)
    ops: list[str] = Field(default_factory=list)
    shapes: dict[str, list[list[int]]] = Field(default_factory=dict)  # {"inputs": [...], "outputs": [...]}
    dtype: str = "float32"
    sha256: str = ""  # of the task source
    forward_ms: float | None = None
    footprint_bytes: int | None = None
    seed: int = 0
    scale: float = 1.0


class DecontamRow(BaseModel):
    """One object of the decontamination report (the contract: `file`, `contaminated`, `match`, `score`), with the
    two similarities it was decided from."""

    file: str
    contaminated: bool
    match: str | None  # the closest file in the reference folder, or null when it is empty
    score: float  # combined similarity to `match` in [0, 1] (docs/data.md, *Decontamination*)
    structure: float | None = None  # structure-signature similarity to `match`; null when a side could not be traced
    text: float = 0.0  # normalised-source similarity to `match`
    traced: bool = False  # whether this input's reference could be traced to aten ops
