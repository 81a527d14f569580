"""Must be rejected: decoy"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = r"""
#include <torch/extension.h>

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

torch::Tensor scale(torch::Tensor x, double alpha) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] * static_cast<float>(alpha);
    return out;
}
"""

ext = load_inline(name="ext", cpp_sources=cpp_src, functions=["relu_fwd", "scale"])

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = ext

    def forward(self, x):
        return x.view(-1).view_as(x)
