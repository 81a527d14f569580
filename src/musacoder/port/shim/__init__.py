"""Shims that let ported (MUSA) code run where only CUDA or the CPU is available.

`include/` holds `musa_to_cuda.h` and stand-ins for the MUSA headers the port writes (generated from
`musacoder.port.mapping.render_shim_files`); `torch_shim` maps `torch.musa`, `torch_musa` and its extension builder
to `torch.cuda` / `torch.utils.cpp_extension`. They verify the port's completeness and consistency, not MUSA itself.
"""

from pathlib import Path

INCLUDE_DIR = Path(__file__).resolve().parent / "include"


def write_include_dir(root: Path = INCLUDE_DIR) -> list[Path]:
    """(Re)write the shim include directory from the mapping table; returns the files written."""
    from musacoder.port.mapping import render_shim_files

    written = []
    for rel, text in render_shim_files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
