"""KernelBench level 1 / 31_ELU.py: ELU: x if x > 0 else alpha * (exp(x) - 1). One grid-stride elementwise CUDA kernel (float4 when aligned)."""
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

__device__ __forceinline__ float op(float x, float p0, float p1) {
    return x > 0.f ? x : p0 * expm1f(x);
}

// Grid-stride elementwise kernel; float4 path when both pointers are 16-byte aligned.
__global__ void ew_kernel(const float* __restrict__ x, float* __restrict__ y,
                          long long n, float p0, float p1, int vec) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    if (vec) {
        const long long n4 = n >> 2;
        const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
        float4* __restrict__ y4 = reinterpret_cast<float4*>(y);
        for (long long i = tid; i < n4; i += stride) {
            float4 v = x4[i];
            v.x = op(v.x, p0, p1);
            v.y = op(v.y, p0, p1);
            v.z = op(v.z, p0, p1);
            v.w = op(v.w, p0, p1);
            y4[i] = v;
        }
        for (long long i = (n4 << 2) + tid; i < n; i += stride) y[i] = op(x[i], p0, p1);
    } else {
        for (long long i = tid; i < n; i += stride) y[i] = op(x[i], p0, p1);
    }
}

torch::Tensor elu_forward(torch::Tensor x, double p0, double p1) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const long long n = xc.numel();
    if (n == 0) return y;
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int vec = ((reinterpret_cast<uintptr_t>(xp) | reinterpret_cast<uintptr_t>(yp)) & 15) == 0 ? 1 : 0;
    const int threads = 256;
    const long long work = vec ? (n / 4 + 1) : n;
    long long blocks = (work + threads - 1) / threads;
    const long long max_blocks = (long long)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32;
    if (blocks > max_blocks) blocks = max_blocks;
    ew_kernel<<<(unsigned int)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xp, yp, n, (float)p0, (float)p1, vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor elu_forward(torch::Tensor x, double p0, double p1);
"""

module = load_inline(
    name="kbc_l1_elu",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['elu_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.elu_forward(x, float(self.alpha), 0.0)
