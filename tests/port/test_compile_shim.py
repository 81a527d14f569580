"""Ported CUDA candidates compile with nvcc through the shim header, batched into one translation unit, and a
leftover CUDA name does not compile (slow: three nvcc runs)."""

from pathlib import Path

import pytest

from musacoder.port.compile_check import batch_unit, compile_ported_many, extract_sources, nvcc_available
from musacoder.port.kernelbench import port_source

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = ["level1/19_ReLU.py", "level1/92_cumsum_exclusive.py"]  # the second uses cudaStream_t


def _ported(rel: str) -> str:
    ported, report = port_source((ROOT / "benchmarks" / "candidates" / "cuda" / rel).read_text(), rel)
    assert report.complete, report.unmapped
    return ported


def test_a_batch_unit_keeps_each_candidate_to_itself():
    texts = [_ported(rel) for rel in CANDIDATES]
    unit, starts = batch_unit([extract_sources(t) for t in texts])
    lines = unit.splitlines()
    assert [lines[s - 1] for s in starts] == ["namespace musa_port_0 {", "namespace musa_port_1 {"]
    first_code = min(starts)
    includes = [i for i, line in enumerate(lines, 1) if line.lstrip().startswith("#include")]
    poison = next(i for i, line in enumerate(lines, 1) if line.startswith("#pragma GCC poison"))
    assert max(includes) < poison < first_code  # every include before the poison, the code after it


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc not installed")
def test_ported_candidates_compile_and_a_cuda_name_left_in_a_port_does_not():
    """The batch holding the broken port fails; nvcc's error points at it, so it alone is compiled again (and fails
    on the poisoned name) and the others are compiled again together (and pass)."""
    items = [(rel, _ported(rel)) for rel in CANDIDATES]
    broken = items[0][1].replace("c10::musa::getCurrentMUSAStream()", "at::cuda::getCurrentCUDAStream()")
    assert broken != items[0][1]
    got = compile_ported_many(items + [("relu-broken", broken)], batch=3)
    for rel in CANDIDATES:
        assert got[rel].ok, got[rel].log
    assert not got["relu-broken"].ok and "poison" in got["relu-broken"].log
