import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

ext = load(name="prebuilt_relu", sources=["/opt/kernels/relu_kernel.cu"], extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
