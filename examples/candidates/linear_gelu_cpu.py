import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

// y = gelu_tanh(x @ W^T + b), x: [B, K], W: [N, K], b: [N]
torch::Tensor linear_gelu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t B = xc.size(0), K = xc.size(1), N = wc.size(0);
    auto out = torch::empty({B, N}, xc.options());
    const float* X = xc.data_ptr<float>();
    const float* W = wc.data_ptr<float>();
    const float* bias = b.data_ptr<float>();
    float* Y = out.data_ptr<float>();
    const float c = 0.7978845608028654f;  // sqrt(2 / pi)
    #pragma omp parallel for collapse(2)
    for (int64_t i = 0; i < B; ++i) {
        for (int64_t j = 0; j < N; ++j) {
            float acc = bias[j];
            for (int64_t k = 0; k < K; ++k) acc += X[i * K + k] * W[j * K + k];
            const float inner = c * (acc + 0.044715f * acc * acc * acc);
            Y[i * N + j] = 0.5f * acc * (1.f + std::tanh(inner));
        }
    }
    return out;
}
"""

ext = load_inline(
    name="linear_gelu_cpu",
    cpp_sources=cpp_source,
    functions=["linear_gelu"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # kept so the state dict lines up; never called

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.linear_gelu(x, self.linear.weight, self.linear.bias)
