import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

RELU_CPP = r"""
#include <torch/extension.h>

torch::Tensor relu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    float* b = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
    return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu", &relu); }
"""


def _build():
    path = os.path.join(os.getcwd(), "relu_file_ext.cpp")
    with open(path, "w") as f:
        f.write(RELU_CPP)
    return load(name="relu_file_ext", sources=[path], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = _build()

    def forward(self, x):
        return self.ext.relu(x)
