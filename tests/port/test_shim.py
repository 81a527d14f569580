"""The torch.musa shim (pure parts here; the process-wide install in a subprocess)."""

import subprocess
import sys

import torch

from musacoder.port.shim import INCLUDE_DIR
from musacoder.port.shim.torch_shim import target_device, to_cuda_kwargs


def test_builder_kwargs_go_back_to_cuda():
    k = to_cuda_kwargs({"name": "m", "cpp_sources": "a", "musa_sources": "b", "extra_musa_cflags": ["-O3"],
                        "with_musa": True, "extra_include_paths": ["/x"]})
    assert k == {"name": "m", "cpp_sources": "a", "cuda_sources": "b", "extra_cuda_cflags": ["-O3"],
                 "with_cuda": True, "extra_include_paths": [str(INCLUDE_DIR), "/x"]}


def test_target_device():
    assert target_device("musa", "cpu") == torch.device("cpu")
    assert target_device("musa:1", "cuda") == torch.device("cuda", 1)
    assert target_device("musa", "cuda") == torch.device("cuda")
    assert target_device("cpu", "cuda") == "cpu"
    assert target_device("musaX", "cpu") == "musaX"


SNIPPET = r'''
from musacoder.port.shim.torch_shim import install
install("cpu")
import torch, torch_musa
from torch_musa.utils.musa_extension import load_inline
x = torch.randn(2, 3, device="musa")
m = torch.nn.Linear(3, 2).musa()
y = m(x.musa()).to(torch.device("musa", 0))
torch.musa.synchronize(); torch.musa.manual_seed(0)
print(x.device, next(m.parameters()).device, y.device, torch.musa.is_available())
'''


def test_install_maps_musa_to_the_cpu_in_its_own_process():
    p = subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["cpu", "cpu", "cpu", "True"]
