import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = """
#include <torch/extension.h>
__global__ void scale_kernel(const float* a, float* out, float s, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] * s;
}
torch::Tensor scale(torch::Tensor a, double s) {
    auto out = torch::empty_like(a);
    size_t n = a.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), out.data_ptr<float>(), (float)s, n);
    return out;
}
"""

scale_ext = load_inline(name="scalar_mul", cpp_sources="torch::Tensor scale(torch::Tensor a, double s);",
                        cuda_sources=cuda_src, functions=["scale"])


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return scale_ext.scale(A.contiguous(), float(s))
