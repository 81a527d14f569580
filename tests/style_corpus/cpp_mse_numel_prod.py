import numpy as np
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>

torch::Tensor mse(torch::Tensor a, torch::Tensor b, int64_t n) {
    auto ac = a.contiguous(); auto bc = b.contiguous();
    const float* pa = ac.data_ptr<float>(); const float* pb = bc.data_ptr<float>();
    double acc = 0.0;
    #pragma omp parallel for reduction(+:acc)
    for (int64_t i = 0; i < n; ++i) { double d = (double)pa[i] - pb[i]; acc += d * d; }
    auto out = torch::empty({}, ac.options());
    out.data_ptr<float>()[0] = (float)(acc / (double)n);
    return out;
}
"""

mse_ext = load_inline(name="mse_cpu_numpy_prod", cpp_sources=src, functions=["mse"],
                      extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        n = int(np.prod(predictions.shape))
        return mse_ext.mse(predictions, targets, n)
