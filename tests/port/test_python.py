"""The Python translator (task files and candidates)."""

import ast

from musacoder.port.python import translate_python

CANDIDATE = '''"""doc: runs on cuda"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <cuda_runtime.h>
torch::Tensor relu_cuda(torch::Tensor x) { TORCH_CHECK(x.is_cuda(), "x must be CUDA"); return x; }
"""
cpp_src = "torch::Tensor relu_cuda(torch::Tensor x);"
module = load_inline(name="m", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["relu_cuda"],
                     extra_cuda_cflags=["-O3"], with_cuda=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return module.relu_cuda(x)  # cuda
'''


def test_candidate_is_ported():
    out, r = translate_python(CANDIDATE)
    ast.parse(out)
    assert "from torch_musa.utils.musa_extension import load_inline" in out
    assert "musa_sources=cuda_src" in out and "extra_musa_cflags=[\"-O3\"]" in out and "with_musa=True" in out
    assert "#include <musa_runtime.h>" in out and "x.is_privateuseone()" in out
    assert out.splitlines()[2].startswith("import torch_musa")
    assert '"""doc: runs on cuda"""' in out and "# cuda" in out  # docstrings and comments untouched
    assert "module.relu_cuda(x)" in out  # the user's function name is not an API name
    assert r.complete, r.unmapped
    assert "relu_cuda" in r.kept


def test_task_file_devices_and_torch_cuda():
    src = '''import torch
def get_inputs():
    torch.cuda.manual_seed(0)
    x = torch.randn(4, device="cuda").cuda()
    y = torch.zeros(4, device='cuda:1')
    z = torch.ones(2, device=f"cuda:{0}")
    torch.cuda.synchronize()
    return [x, y, z, "cuda is a word here"]
'''
    out, r = translate_python(src)
    assert 'device="musa").musa()' in out and "device='musa:1'" in out and 'device=f"musa:{0}"' in out
    assert "torch.musa.manual_seed(0)" in out and "torch.musa.synchronize()" in out
    assert '"cuda is a word here"' in out
    assert "import torch_musa" in out
    assert r.complete


def test_file_without_cuda_code_is_unchanged():
    src = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x.to(x.device)\n"
    out, r = translate_python(src)
    assert out == src and not r.changed and r.complete


def test_unmapped_python_names_are_reported():
    src = '''import torch
from torch.utils.cpp_extension import load_inline, CUDA_HOME
torch.backends.cudnn.benchmark = True
torch.cuda.graphs.make_graphed_callables
def f(x):
    return x.is_cuda
m = load_inline(name="a", cpp_sources="", cuda_sources="", extra_cuda_cflags=["-O3", "--use_fast_math"])
'''
    out, r = translate_python(src)
    assert {"torch.utils.cpp_extension.CUDA_HOME", "torch.backends.cudnn.benchmark", "torch.cuda.graphs",
            "x.is_cuda", "compiler flag --use_fast_math"} <= r.unmapped
    assert "torch.backends.cudnn.benchmark" in out  # left in place


def test_module_import_of_the_builder():
    out, r = translate_python("from torch.utils import cpp_extension\nm = cpp_extension.load_inline(name='a', cpp_sources='')\n")
    assert out.startswith("import torch_musa")
    assert "from torch_musa.utils import musa_extension as cpp_extension" in out
    assert r.complete
