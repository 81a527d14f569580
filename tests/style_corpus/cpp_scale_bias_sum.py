import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp = r"""
#include <torch/extension.h>

torch::Tensor scale_bias_sum(torch::Tensor x, double scale) {
    auto xc = x.contiguous();
    const int64_t rows = xc.size(0), cols = xc.size(1);
    auto out = torch::empty({rows}, xc.options());
    const float* p = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        double acc = 0.0;
        for (int64_t c = 0; c < cols; ++c) acc += (double)p[r * cols + c] * scale + 1.0;
        o[r] = (float)acc;
    }
    return out;
}
"""

ext = load_inline(name="scale_bias_sum_cpu", cpp_sources=cpp, functions=["scale_bias_sum"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return ext.scale_bias_sum(x, self.scale)
