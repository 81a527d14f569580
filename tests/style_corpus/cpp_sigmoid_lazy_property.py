import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = """
#include <torch/extension.h>
#include <cmath>

torch::Tensor sigmoid_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    auto* a = xc.data_ptr<float>();
    auto* b = y.data_ptr<float>();
    for (int64_t i = 0, n = xc.numel(); i < n; ++i) b[i] = 1.0f / (1.0f + std::exp(-a[i]));
    return y;
}
"""

_EXT = None


def get_ext():
    global _EXT
    if _EXT is None:
        _EXT = load_inline(name="sigmoid_cpu_lazy", cpp_sources=SRC, functions=["sigmoid_fwd"], extra_cflags=["-O2"])
    return _EXT


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return get_ext().sigmoid_fwd(x)
