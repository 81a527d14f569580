import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

torch::Tensor relu_on_stream(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
    relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

ext = load_inline(name="relu_stream_cur", cpp_sources="torch::Tensor relu_on_stream(torch::Tensor x);",
                  cuda_sources=cuda_src, functions=["relu_on_stream"], extra_cuda_cflags=["-O3", "-Xptxas=-v"])


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_on_stream(x.contiguous())
