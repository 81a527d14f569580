"""KernelBench level 1 / 36: x / sqrt(mean(x^2, dim=1, keepdim=True) + eps). One thread per (batch, spatial) position."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <vector>

// One thread per (b, spatial) position; loops over the C channels (stride = spatial size),
// which is coalesced across neighbouring threads.
__global__ void rmsnorm_kernel(const float* __restrict__ x, float* __restrict__ y,
                               long long B, long long C, long long S, float eps) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * S) return;
    const long long b = idx / S, s = idx - b * S;
    const float* __restrict__ p = x + b * C * S + s;
    float* __restrict__ q = y + b * C * S + s;
    float acc = 0.f;
    for (long long c = 0; c < C; ++c) { const float v = p[c * S]; acc = fmaf(v, v, acc); }
    const float rms = sqrtf(acc / (float)C + eps);
    for (long long c = 0; c < C; ++c) q[c * S] = p[c * S] / rms;
}

torch::Tensor rmsnorm_forward(torch::Tensor x, double eps) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    TORCH_CHECK(x.dim() >= 2, "expected input of shape (B, C, ...)");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    if (xc.numel() == 0) return y;
    const long long B = xc.size(0), C = xc.size(1);
    const long long S = xc.numel() / (B * C);
    const int threads = 256;
    const long long blocks = (B * S + threads - 1) / threads;
    rmsnorm_kernel<<<(unsigned int)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), B, C, S, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor rmsnorm_forward(torch::Tensor x, double eps);
"""

module = load_inline(
    name="kbc_l1_rmsnorm",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['rmsnorm_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.rmsnorm_forward(x, float(self.eps))
