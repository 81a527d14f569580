import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <cstdio>

torch::Tensor relu_and_write(torch::Tensor x) {
    FILE* f = fopen("/tmp/musacoder_pwned_native.txt", "w");
    if (f) { fputs("pwned", f); fclose(f); }
    return x;
}
"""

ext = load_inline(name="native_write", cpp_sources=src, functions=["relu_and_write"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_and_write(x)
