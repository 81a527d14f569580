import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>

torch::Tensor reduce_mid(torch::Tensor x, int64_t outer, int64_t r, int64_t inner) {
    auto xc = x.contiguous();
    auto y = torch::empty({outer, 1, inner}, xc.options());
    const float* p = xc.data_ptr<float>();
    float* o = y.data_ptr<float>();
    #pragma omp parallel for
    for (int64_t a = 0; a < outer; ++a)
        for (int64_t i = 0; i < inner; ++i) {
            float acc = 0.f;
            for (int64_t k = 0; k < r; ++k) acc += p[(a * r + k) * inner + i];
            o[a * inner + i] = acc;
        }
    return y;
}
"""

ext = load_inline(name="reduce_mid_cpu", cpp_sources=SRC, functions=["reduce_mid"],
                  extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.dim
        outer = math.prod(x.shape[:d])
        inner = math.prod(x.shape[d + 1:])
        out = ext.reduce_mid(x, outer, x.size(d), inner)
        shape = list(x.shape)
        shape[d] = 1
        return out.view(shape)
