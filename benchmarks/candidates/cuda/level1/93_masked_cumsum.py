"""KernelBench level 1 / 93_masked_cumsum.py: torch.cumsum(x * mask, dim) with a bool mask. Any dim: [outer, R, inner] view; innermost dim: one block per row, tiled block scan (inclusive sum scan of x * mask (mask applied in the load)) with warp shuffles and a running carry; strided dim: one thread per column, sequential."""
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

#define SCAN_PROD 0
#define SCAN_REVERSE 0
#define SCAN_EXCLUSIVE 0
#define SCAN_MASKED 1

#define SCAN_THREADS 256
#define SCAN_ITEMS 4
#define NWARPS (SCAN_THREADS / 32)

__device__ __forceinline__ float scan_op(float a, float b) {
#if SCAN_PROD
    return a * b;
#else
    return a + b;
#endif
}
#if SCAN_PROD
#define SCAN_IDENT 1.f
#else
#define SCAN_IDENT 0.f
#endif

__device__ __forceinline__ float load_elem(const float* __restrict__ x, const bool* __restrict__ m, long long i) {
#if SCAN_MASKED
    return x[i] * (float)m[i];  // x * mask, the mask promoted to 0.0 / 1.0 like PyTorch's type promotion
#else
    return x[i];
#endif
}

// Scan along a row of R contiguous elements (the scanned dim is the innermost): one block per row, the row
// processed in tiles of SCAN_THREADS * SCAN_ITEMS elements. Each thread scans SCAN_ITEMS consecutive elements
// sequentially, a warp-shuffle scan and a scan over the warp totals give each thread its exclusive prefix, and a
// running carry links the tiles. Logical position j maps to memory index (SCAN_REVERSE ? R - 1 - j : j).
__global__ void scan_rows_kernel(const float* __restrict__ x, const bool* __restrict__ mask, float* __restrict__ y,
                                 long long R) {
    __shared__ float warp_tot[NWARPS];
    __shared__ float carry_sh;
    const long long base_off = (long long)blockIdx.x * R;
    const float* __restrict__ xr = x + base_off;
    const bool* __restrict__ mr = mask ? mask + base_off : nullptr;
    float* __restrict__ yr = y + base_off;
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (threadIdx.x == 0) carry_sh = SCAN_IDENT;
    __syncthreads();
    for (long long base = 0; base < R; base += SCAN_THREADS * SCAN_ITEMS) {
        float v[SCAN_ITEMS];
        const long long start = base + (long long)threadIdx.x * SCAN_ITEMS;
        #pragma unroll
        for (int j = 0; j < SCAN_ITEMS; ++j) {
            const long long i = start + j;
            v[j] = (i < R) ? load_elem(xr, mr, SCAN_REVERSE ? R - 1 - i : i) : SCAN_IDENT;
        }
        // v[j] becomes the inclusive prefix within this thread's items
        #pragma unroll
        for (int j = 1; j < SCAN_ITEMS; ++j) v[j] = scan_op(v[j - 1], v[j]);
        // inclusive warp scan of the thread totals
        float t = v[SCAN_ITEMS - 1];
        #pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float u = __shfl_up_sync(0xffffffffu, t, o);
            if (lane >= o) t = scan_op(u, t);
        }
        float lane_excl = __shfl_up_sync(0xffffffffu, t, 1);
        if (lane == 0) lane_excl = SCAN_IDENT;
        if (lane == 31) warp_tot[wid] = t;
        __syncthreads();
        if (wid == 0) {
            float w = (lane < NWARPS) ? warp_tot[lane] : SCAN_IDENT;
            #pragma unroll
            for (int o = 1; o < 32; o <<= 1) {
                const float u = __shfl_up_sync(0xffffffffu, w, o);
                if (lane >= o) w = scan_op(u, w);
            }
            if (lane < NWARPS) warp_tot[lane] = w;  // inclusive scan of the warp totals
        }
        __syncthreads();
        const float carry = carry_sh;
        const float excl = scan_op(scan_op(carry, wid > 0 ? warp_tot[wid - 1] : SCAN_IDENT), lane_excl);
        #pragma unroll
        for (int j = 0; j < SCAN_ITEMS; ++j) {
            const long long i = start + j;
            if (i < R) {
#if SCAN_EXCLUSIVE
                const float outv = (j == 0) ? excl : scan_op(excl, v[j - 1]);
#else
                const float outv = scan_op(excl, v[j]);
#endif
                yr[SCAN_REVERSE ? R - 1 - i : i] = outv;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) carry_sh = scan_op(carry, warp_tot[NWARPS - 1]);
        __syncthreads();
    }
}

// Scan along a strided dim (inner > 1): one thread per (outer, inner) column, sequential over R; neighbouring
// threads read neighbouring addresses.
__global__ void scan_cols_kernel(const float* __restrict__ x, const bool* __restrict__ mask, float* __restrict__ y,
                                 long long outer, long long R, long long inner) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    const long long o = idx / inner, in = idx - o * inner;
    const long long base = o * R * inner + in;
    float acc = SCAN_IDENT;
    for (long long j = 0; j < R; ++j) {
        const long long r = SCAN_REVERSE ? R - 1 - j : j;
        const long long off = base + r * inner;
        const float v = load_elem(x, mask, off);
#if SCAN_EXCLUSIVE
        y[off] = acc;
        acc = scan_op(acc, v);
#else
        acc = scan_op(acc, v);
        y[off] = acc;
#endif
    }
}

static torch::Tensor scan_impl(torch::Tensor x, const torch::Tensor* mask, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    const int64_t nd = x.dim();
    TORCH_CHECK(nd >= 1, "input must have at least one dimension");
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    auto xc = x.contiguous();
    torch::Tensor mc;
    if (mask) {
        TORCH_CHECK(mask->is_cuda() && mask->scalar_type() == torch::kBool, "mask must be a CUDA bool tensor");
        TORCH_CHECK(mask->sizes() == x.sizes(), "mask must have the shape of x");
        mc = mask->contiguous();
    }
    auto y = torch::empty_like(xc);
    if (xc.numel() == 0) return y;
    const long long R = xc.size(dim);
    long long outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= xc.size(d);
    const bool* mp = mask ? mc.data_ptr<bool>() : nullptr;
    auto stream = at::cuda::getCurrentCUDAStream();
    if (inner == 1) {
        TORCH_CHECK(outer < (1LL << 31), "too many rows");
        scan_rows_kernel<<<(unsigned int)outer, SCAN_THREADS, 0, stream>>>(xc.data_ptr<float>(), mp,
                                                                             y.data_ptr<float>(), R);
    } else {
        const long long n = outer * inner;
        scan_cols_kernel<<<(unsigned int)((n + 255) / 256), 256, 0, stream>>>(xc.data_ptr<float>(), mp,
                                                                             y.data_ptr<float>(), outer, R, inner);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}

torch::Tensor masked_cumsum_forward(torch::Tensor x, torch::Tensor mask, int64_t dim) {
    return scan_impl(x, &mask, dim);
}
"""

cpp_src = r"""
torch::Tensor masked_cumsum_forward(torch::Tensor x, torch::Tensor mask, int64_t dim);
"""

module = load_inline(
    name="kbc_l1_scan_93",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['masked_cumsum_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        return module.masked_cumsum_forward(x, mask, self.dim)
