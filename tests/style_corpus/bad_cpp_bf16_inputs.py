import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

src = r"""
#include <torch/extension.h>
#include <cmath>
#include <cstring>
static inline float bf16_round(float v) { uint32_t u; std::memcpy(&u, &v, 4); u &= 0xFFFF0000u; float r; std::memcpy(&r, &u, 4); return r; }
torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous(); auto wc = w.contiguous();
    const int64_t M = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto y = torch::empty({M, N}, xc.options());
    const float* X = xc.data_ptr<float>(); const float* W = wc.data_ptr<float>(); const float* B = b.data_ptr<float>(); float* Y = y.data_ptr<float>();
    for (int64_t i = 0; i < M; ++i) for (int64_t j = 0; j < N; ++j) {
        float acc = B[j];
        for (int64_t k = 0; k < K; ++k) acc += bf16_round(X[i * K + k]) * bf16_round(W[j * K + k]);
        Y[i * N + j] = 0.5f * acc * (1.f + std::tanh(0.7978845608f * (acc + 0.044715f * acc * acc * acc)));
    }
    return y;
}
"""

ext = load_inline(name="lg_bf16", cpp_sources=src, functions=["linear_gelu"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.linear_gelu(x, self.linear.weight, self.linear.bias)
