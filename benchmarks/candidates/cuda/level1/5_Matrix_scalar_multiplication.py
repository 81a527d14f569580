"""KernelBench level 1 / 5: C = A * s (s a Python float, applied in fp32). Grid-stride float4 kernel."""
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

__global__ void scale_kernel(const float* __restrict__ a, float* __restrict__ c, long long n, float s, int vec) {
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    if (vec) {
        const long long n4 = n >> 2;
        const float4* a4 = reinterpret_cast<const float4*>(a);
        float4* c4 = reinterpret_cast<float4*>(c);
        for (long long i = tid; i < n4; i += stride) {
            float4 v = a4[i];
            v.x *= s; v.y *= s; v.z *= s; v.w *= s;
            c4[i] = v;
        }
        for (long long i = (n4 << 2) + tid; i < n; i += stride) c[i] = a[i] * s;
    } else {
        for (long long i = tid; i < n; i += stride) c[i] = a[i] * s;
    }
}

torch::Tensor scalar_mul_forward(torch::Tensor A, double s) {
    TORCH_CHECK(A.is_cuda(), "A must be a CUDA tensor");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32, "A must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(A));
    auto Ac = A.contiguous();
    auto C = torch::empty_like(Ac);
    const long long n = Ac.numel();
    if (n == 0) return C;
    const float* ap = Ac.data_ptr<float>();
    float* cp = C.data_ptr<float>();
    const int vec = ((reinterpret_cast<uintptr_t>(ap) | reinterpret_cast<uintptr_t>(cp)) & 15) == 0 ? 1 : 0;
    const int threads = 256;
    long long blocks = ((vec ? n / 4 + 1 : n) + threads - 1) / threads;
    const long long max_blocks = (long long)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32;
    if (blocks > max_blocks) blocks = max_blocks;
    scale_kernel<<<(unsigned int)blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(ap, cp, n, (float)s, vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

cpp_src = r"""
torch::Tensor scalar_mul_forward(torch::Tensor A, double s);
"""

module = load_inline(
    name="kbc_l1_scalar_mul",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['scalar_mul_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return module.scalar_mul_forward(A, float(s))
