"""Plain arithmetic on shapes runs as ops the profiler records (`aten::prod` over a small sizes tensor): accepted end
to end, while the same op over data stays illegal. Builds the CPU example's extension (cached)."""

from pathlib import Path

import pytest

from musacoder import verify
from musacoder.config import VerifyConfig

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "examples" / "tasks" / "relu.py"
CALL = "        return relu_ext.relu_forward(x)"


def _with(line: str) -> str:
    text = (ROOT / "examples" / "candidates" / "relu_cpu.py").read_text()
    assert CALL in text
    return text.replace(CALL, f"{line}\n{CALL}")


@pytest.mark.slow
def test_element_count_from_the_shape_is_not_a_fallback():
    v = verify(RELU, _with("        assert int(torch.prod(torch.tensor(x.shape)).item()) == x.numel()"), backend="cpu",
               config=VerifyConfig(time_candidate=False))
    assert v.status == "ok", (v.violations, v.error)


@pytest.mark.slow
def test_prod_over_the_data_stays_illegal():
    v = verify(RELU, _with("        s = torch.prod(x)"), backend="cpu", config=VerifyConfig(time_candidate=False))
    assert v.status == "illegal" and any("torch.prod" in x for x in v.violations), v.violations
