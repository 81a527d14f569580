import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void sq_diff_sum(const float* __restrict__ a, const float* __restrict__ b, double* __restrict__ acc, int64_t n) {
    __shared__ double buf[256];
    double local = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)blockDim.x * gridDim.x) {
        double d = (double)a[i] - (double)b[i];
        local += d * d;
    }
    buf[threadIdx.x] = local;
    __syncthreads();
    for (int s = 128; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(acc, buf[0]);
}

__global__ void finish(const double* acc, float* out, int64_t n) { out[0] = (float)(acc[0] / (double)n); }

torch::Tensor mse_cuda(torch::Tensor pred, torch::Tensor target) {
    auto p = pred.contiguous();
    auto t = target.contiguous();
    int64_t n = p.numel();
    auto acc = torch::zeros({1}, p.options().dtype(torch::kFloat64));
    auto out = torch::empty({}, p.options());
    int blocks = (int)std::min<int64_t>((n + 255) / 256, 4096);
    sq_diff_sum<<<blocks, 256>>>(p.data_ptr<float>(), t.data_ptr<float>(), acc.data_ptr<double>(), n);
    finish<<<1, 1>>>(acc.data_ptr<double>(), out.data_ptr<float>(), n);
    return out;
}
"""

mse = load_inline(name="mse_reduce", cpp_sources="torch::Tensor mse_cuda(torch::Tensor pred, torch::Tensor target);",
                  cuda_sources=cuda_source, functions=["mse_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        return mse.mse_cuda(predictions, targets)
