"""What one translation did: the names it mapped, the CUDA names it could not map, and user names it kept."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class PortReport:
    """`mapped` counts rewrites as "cuda → musa"; `unmapped` are CUDA API names (or flags, imports) the table has
    no entry for, left in the output and reported; `kept` are user-defined names that merely contain "cuda"
    (e.g. a wrapper called `relu_cuda`), left as they are on purpose."""

    mapped: Counter = field(default_factory=Counter)
    unmapped: set[str] = field(default_factory=set)
    kept: set[str] = field(default_factory=set)

    @property
    def complete(self) -> bool:
        """True when nothing CUDA-specific was left unmapped."""
        return not self.unmapped

    @property
    def changed(self) -> bool:
        return bool(self.mapped)

    def add(self, cuda: str, musa: str, n: int = 1) -> None:
        self.mapped[f"{cuda} → {musa}"] += n

    def merge(self, other: "PortReport") -> "PortReport":
        self.mapped.update(other.mapped)
        self.unmapped |= other.unmapped
        self.kept |= other.kept
        return self

    def as_dict(self) -> dict:
        return {"mapped": dict(sorted(self.mapped.items())), "unmapped": sorted(self.unmapped),
                "kept": sorted(self.kept)}
