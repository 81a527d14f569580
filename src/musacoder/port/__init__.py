"""The CUDA → MUSA port: KernelBench task files and CUDA candidates translated to torch_musa / MUSA names.

`mapping` holds the documented table; `cpp` and `python` are the two translators; `kernelbench` ports a whole tree
or one candidate and writes the report; `shim` maps the MUSA names back to CUDA (C++ header and `torch.musa`
module) so ported code can be compiled and run where only CUDA or the CPU is available.
"""

from musacoder.port.report import PortReport

__all__ = ["PortReport"]
