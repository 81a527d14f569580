"""KernelBench level 1 / 89: cumsum along dim (last dim). One block per row, tiled block scan with a running carry."""
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

#define SCAN_THREADS 256
#define SCAN_ITEMS 4
// One block per row; the row is scanned in tiles of SCAN_THREADS * SCAN_ITEMS elements.
// Each thread scans SCAN_ITEMS consecutive elements, then a warp-shuffle scan and a scan over
// warp totals give each thread its exclusive offset; a running carry links the tiles.
__global__ void cumsum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, long long R) {
    __shared__ float warp_tot[SCAN_THREADS / 32];
    __shared__ float carry_sh;
    const long long row = blockIdx.x;
    const float* __restrict__ xr = x + row * R;
    float* __restrict__ yr = y + row * R;
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (threadIdx.x == 0) carry_sh = 0.f;
    __syncthreads();
    for (long long base = 0; base < R; base += SCAN_THREADS * SCAN_ITEMS) {
        float v[SCAN_ITEMS];
        const long long start = base + (long long)threadIdx.x * SCAN_ITEMS;
        #pragma unroll
        for (int j = 0; j < SCAN_ITEMS; ++j) {
            const long long i = start + j;
            v[j] = (i < R) ? xr[i] : 0.f;
        }
        #pragma unroll
        for (int j = 1; j < SCAN_ITEMS; ++j) v[j] += v[j - 1];
        // inclusive warp scan of the thread totals
        float t = v[SCAN_ITEMS - 1];
        #pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float u = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t += u;
        }
        if (lane == 31) warp_tot[wid] = t;
        __syncthreads();
        if (wid == 0) {
            float w = (lane < SCAN_THREADS / 32) ? warp_tot[lane] : 0.f;
            #pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const float u = __shfl_up_sync(0xffffffffu, w, o);
                if (lane >= o) w += u;
            }
            if (lane < SCAN_THREADS / 32) warp_tot[lane] = w;  // inclusive scan of warp totals
        }
        __syncthreads();
        const float carry = carry_sh;
        const float excl = carry + (wid > 0 ? warp_tot[wid - 1] : 0.f) + (t - v[SCAN_ITEMS - 1]);
        #pragma unroll
        for (int j = 0; j < SCAN_ITEMS; ++j) {
            const long long i = start + j;
            if (i < R) yr[i] = excl + v[j];
        }
        __syncthreads();
        if (threadIdx.x == 0) carry_sh = carry + warp_tot[SCAN_THREADS / 32 - 1];
        __syncthreads();
    }
}

torch::Tensor cumsum_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    const int64_t nd = x.dim();
    TORCH_CHECK(nd >= 1, "input must have at least one dimension");
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim == nd - 1, "this kernel scans over the last dimension only");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    if (xc.numel() == 0) return y;
    const long long R = xc.size(nd - 1);
    const long long rows = xc.numel() / R;
    cumsum_rows_kernel<<<(unsigned int)rows, SCAN_THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), R);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor cumsum_forward(torch::Tensor x, int64_t dim);
"""

module = load_inline(
    name="kbc_l1_cumsum",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['cumsum_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return module.cumsum_forward(x, self.dim)
