import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>

__global__ void linear_epilogue(const float* x, const float* w, const float* b, float* y,
                                int M, int K, int N, float mult, float slope) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (r >= M || c >= N) return;
    const float* xr = x + (size_t)r * K;
    const float* wc = w + (size_t)c * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(xr[k], wc[k], acc);
    float v = (acc + b[c]) * mult;
    y[(size_t)r * N + c] = v > 0.f ? v : v * slope;
}

torch::Tensor run(torch::Tensor x, torch::Tensor w, torch::Tensor b, double mult, double slope) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 grid((N + 127) / 128, M);
    linear_epilogue<<<grid, 128>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
                                   M, K, N, (float)mult, (float)slope);
    return y;
}
"""

ext = load_inline(name="linear_epilogue_mod",
                  cpp_sources="torch::Tensor run(torch::Tensor x, torch::Tensor w, torch::Tensor b, double mult, double slope);",
                  cuda_sources=SRC, functions=["run"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)  # kept for its parameters only
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        return ext.run(x.contiguous(), self.gemm.weight, self.gemm.bias, self.multiplier, self.negative_slope)
