import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_src = r"""
#include <torch/extension.h>
#define TS 16

// y = leaky_relu((x @ W^T + b) * mult), W in nn.Linear's [out, in] layout
__global__ void gemm_mul_leaky(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
                               float* __restrict__ y, int M, int K, int N, float mult, float slope) {
    __shared__ float xs[TS][TS];
    __shared__ float ws[TS][TS];
    int r = blockIdx.y * TS + threadIdx.y, c = blockIdx.x * TS + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TS) {
        xs[threadIdx.y][threadIdx.x] = (r < M && k0 + threadIdx.x < K) ? x[(size_t)r * K + k0 + threadIdx.x] : 0.f;
        int wc = blockIdx.x * TS + threadIdx.y;
        ws[threadIdx.y][threadIdx.x] = (wc < N && k0 + threadIdx.x < K) ? w[(size_t)wc * K + k0 + threadIdx.x] : 0.f;
        __syncthreads();
        for (int k = 0; k < TS; ++k) acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
        __syncthreads();
    }
    if (r < M && c < N) {
        float v = (acc + b[c]) * mult;
        y[(size_t)r * N + c] = v > 0.f ? v : v * slope;
    }
}

torch::Tensor fused_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double mult, double slope) {
    int M = x.size(0), K = x.size(1), N = w.size(0);
    auto y = torch::empty({M, N}, x.options());
    dim3 block(TS, TS), grid((N + TS - 1) / TS, (M + TS - 1) / TS);
    gemm_mul_leaky<<<grid, block>>>(x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
                                    M, K, N, (float)mult, (float)slope);
    return y;
}
"""

fused = load_inline(name="gemm_mul_leaky",
                    cpp_sources="torch::Tensor fused_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double mult, double slope);",
                    cuda_sources=fused_src, functions=["fused_forward"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        ref = nn.Linear(in_features, out_features)  # same initialisation as the reference's layer
        self.weight = nn.Parameter(ref.weight.detach().clone())
        self.bias = nn.Parameter(ref.bias.detach().clone())
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        return fused.fused_forward(x.contiguous(), self.weight, self.bias, self.multiplier, self.negative_slope)
