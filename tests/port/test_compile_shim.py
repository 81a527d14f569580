"""Ported CUDA candidates compile with nvcc through the shim header, and a leftover CUDA name does not (slow)."""

from pathlib import Path

import pytest

from musacoder.port.compile_check import compile_ported, nvcc_available
from musacoder.port.kernelbench import port_source

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = ["level1/19_ReLU.py", "level1/92_cumsum_exclusive.py"]  # the second uses cudaStream_t

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not nvcc_available(), reason="nvcc not installed")]


@pytest.mark.parametrize("rel", CANDIDATES)
def test_ported_candidate_compiles_through_the_shim(rel, tmp_path):
    path = ROOT / "benchmarks" / "candidates" / "cuda" / rel
    ported, report = port_source(path.read_text(), rel)
    assert report.complete, report.unmapped
    res = compile_ported(ported, rel, workdir=tmp_path)
    assert res.ok, res.log


def test_a_cuda_name_left_in_the_port_fails_to_compile(tmp_path):
    path = ROOT / "benchmarks" / "candidates" / "cuda" / CANDIDATES[0]
    ported, _ = port_source(path.read_text(), "relu")
    broken = ported.replace("c10::musa::getCurrentMUSAStream()", "at::cuda::getCurrentCUDAStream()")
    assert broken != ported
    res = compile_ported(broken, "relu-broken", workdir=tmp_path)
    assert not res.ok and "poison" in res.log
