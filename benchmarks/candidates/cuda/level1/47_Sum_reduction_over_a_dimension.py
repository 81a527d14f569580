"""KernelBench level 1 / 47_Sum_reduction_over_a_dimension.py: torch.sum(x, dim, keepdim=True). Input viewed as [outer, R, inner]: one thread per output with coalesced strided reads when inner >= 32, else one block per output with a shuffle reduction."""
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

#define MODE 0
#define IS_ARG (MODE >= 4)
typedef float out_t;

__device__ __forceinline__ bool better(float v, float best) {
#if MODE == 2 || MODE == 4
    return v > best;
#else
    return v < best;
#endif
}

// Path A (inner >= 32): one thread per (outer, inner) output; reads along R are coalesced across threads.
__global__ void reduce_cols_kernel(const float* __restrict__ x, out_t* __restrict__ y,
                                   long long outer, long long R, long long inner) {
    const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= outer * inner) return;
    const long long o = idx / inner, i = idx - o * inner;
    const float* __restrict__ p = x + o * R * inner + i;
#if MODE <= 1
    float acc = 0.f;
    long long r = 0;
    for (; r + 4 <= R; r += 4) {
        const float a = p[r * inner], b = p[(r + 1) * inner], c = p[(r + 2) * inner], d = p[(r + 3) * inner];
        acc += a; acc += b; acc += c; acc += d;
    }
    for (; r < R; ++r) acc += p[r * inner];
  #if MODE == 1
    y[idx] = acc / (float)R;
  #else
    y[idx] = acc;
  #endif
#else
    float best = p[0];
    long long bi = 0;
    for (long long r = 1; r < R; ++r) {
        const float v = p[r * inner];
        if (better(v, best)) { best = v; bi = r; }
    }
  #if IS_ARG
    y[idx] = (out_t)bi;
  #else
    y[idx] = best;
  #endif
#endif
}

// Path B (inner < 32): one block per output, block-wide reduction over R (stride inner).
__global__ void reduce_block_kernel(const float* __restrict__ x, out_t* __restrict__ y,
                                    long long R, long long inner) {
    __shared__ float shv[32];
    __shared__ long long shi[32];
    const long long idx = blockIdx.x;
    const long long o = idx / inner, i = idx - o * inner;
    const float* __restrict__ p = x + o * R * inner + i;
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    const int nw = (blockDim.x + 31) >> 5;
#if MODE <= 1
    float acc = 0.f;
    for (long long r = threadIdx.x; r < R; r += blockDim.x) acc += p[r * inner];
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) shv[wid] = acc;
    __syncthreads();
    if (wid == 0) {
        float t = (lane < nw) ? shv[lane] : 0.f;
        #pragma unroll
        for (int off = 16; off > 0; off >>= 1) t += __shfl_xor_sync(0xffffffffu, t, off);
  #if MODE == 1
        if (lane == 0) y[idx] = t / (float)R;
  #else
        if (lane == 0) y[idx] = t;
  #endif
    }
#else
    // (value, index) pairs; ties resolve to the smallest index (first occurrence).
    float best = 0.f;
    long long bi = -1;
    for (long long r = threadIdx.x; r < R; r += blockDim.x) {
        const float v = p[r * inner];
        if (bi < 0 || better(v, best)) { best = v; bi = r; }
    }
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, best, off);
        const long long oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (oi >= 0 && (bi < 0 || better(ov, best) || (ov == best && oi < bi))) { best = ov; bi = oi; }
    }
    if (lane == 0) { shv[wid] = best; shi[wid] = bi; }
    __syncthreads();
    if (wid == 0) {
        best = (lane < nw) ? shv[lane] : 0.f;
        bi = (lane < nw) ? shi[lane] : -1;
        #pragma unroll
        for (int off = 16; off > 0; off >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, best, off);
            const long long oi = __shfl_xor_sync(0xffffffffu, bi, off);
            if (oi >= 0 && (bi < 0 || better(ov, best) || (ov == best && oi < bi))) { best = ov; bi = oi; }
        }
  #if IS_ARG
        if (lane == 0) y[idx] = (out_t)bi;
  #else
        if (lane == 0) y[idx] = best;
  #endif
    }
#endif
}

torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    const int64_t nd = x.dim();
    TORCH_CHECK(nd >= 1, "input must have at least one dimension");
    if (dim < 0) dim += nd;
    TORCH_CHECK(dim >= 0 && dim < nd, "dim out of range");
    auto xc = x.contiguous();
    const long long R = xc.size(dim);
    TORCH_CHECK(R > 0 || MODE <= 1, "cannot reduce over an empty dimension");
    long long outer = 1, inner = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < nd; ++d) inner *= xc.size(d);
    std::vector<int64_t> sizes = xc.sizes().vec();
    if (true) sizes[dim] = 1; else sizes.erase(sizes.begin() + dim);
    auto y = torch::empty(sizes, xc.options().dtype(torch::kFloat32));
    const long long nout = outer * inner;
    if (nout == 0) return y;
    auto stream = at::cuda::getCurrentCUDAStream();
    if (inner >= 32) {
        const int threads = 256;
        const long long blocks = (nout + threads - 1) / threads;
        reduce_cols_kernel<<<(unsigned int)blocks, threads, 0, stream>>>(
            xc.data_ptr<float>(), y.data_ptr<out_t>(), outer, R, inner);
    } else {
        reduce_block_kernel<<<(unsigned int)nout, 256, 0, stream>>>(
            xc.data_ptr<float>(), y.data_ptr<out_t>(), R, inner);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

cpp_src = r"""
torch::Tensor sum_dim_forward(torch::Tensor x, int64_t dim);
"""

module = load_inline(
    name="kbc_l1_sum_dim",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=['sum_dim_forward'],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return module.sum_dim_forward(x, self.dim)
