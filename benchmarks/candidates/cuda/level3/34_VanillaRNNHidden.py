"""KernelBench level 3 / 34_VanillaRNNHidden.py: Elman RNN over a sequence: h_t = tanh(i2h([x_t, h_{t-1}])), y_t = h2o(h_t), outputs stacked to (seq_len, batch, output_size). The C++ wrapper loops over time steps and launches two kernels per step: one warp per (batch, hidden unit) computes the i2h dot product directly from x_t and h_{t-1} (the concatenation is never formed; W_i2h columns [0, input_size) multiply x_t, the rest h_{t-1}) plus bias and tanh; one warp per (batch, output) computes h2o straight into the output slice. fp32 lane-strided accumulation with a shuffle tree; h0 is never modified (hidden states ping-pong between two buffers)."""
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
#include <cmath>

#define CHECK_F32(t) TORCH_CHECK((t).is_cuda() && (t).scalar_type() == torch::kFloat32, #t " must be a float32 CUDA tensor")
__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_min(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
// Block-wide reductions (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float t = (lane < nw) ? sh[lane] : 0.f;
        t = warp_sum(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}
__device__ __forceinline__ double block_sum_d(double v, double* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum_d(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        double t = (lane < nw) ? sh[lane] : 0.0;
        t = warp_sum_d(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}
__device__ __forceinline__ float block_max(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float t = (lane < nw) ? sh[lane] : -INFINITY;
        t = warp_max(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}
__device__ __forceinline__ float block_min(float v, float* sh) {
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_min(v);
    __syncthreads();
    if (lane == 0) sh[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float t = (lane < nw) ? sh[lane] : INFINITY;
        t = warp_min(t);
        if (lane == 0) sh[0] = t;
    }
    __syncthreads();
    return sh[0];
}

// hn[b, n] = tanh(b1[n] + sum_k x[b, k] W1[n, k] + sum_k h[b, k] W1[n, I + k]); one warp per (b, n).
__global__ void rnn_hidden_kernel(const float* __restrict__ x, const float* __restrict__ h, const float* __restrict__ W1,
                                  const float* __restrict__ b1, float* __restrict__ hn, int B, int I, int H) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (warp >= (long long)B * H) return;
    const int b = (int)(warp / H), n = (int)(warp - (long long)b * H);
    const float* __restrict__ w = W1 + (long long)n * (I + H);
    const float* __restrict__ xb = x + (long long)b * I;
    const float* __restrict__ hb = h + (long long)b * H;
    float acc = 0.f;
    for (int k = lane; k < I; k += 32) acc = fmaf(xb[k], w[k], acc);
    for (int k = lane; k < H; k += 32) acc = fmaf(hb[k], w[I + k], acc);
    acc = warp_sum(acc);
    if (lane == 0) hn[(long long)b * H + n] = tanhf(acc + b1[n]);
}

// y[b, o] = b2[o] + sum_k h[b, k] W2[o, k]; one warp per (b, o).
__global__ void rnn_output_kernel(const float* __restrict__ h, const float* __restrict__ W2, const float* __restrict__ b2,
                                  float* __restrict__ y, int B, int H, int O) {
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (warp >= (long long)B * O) return;
    const int b = (int)(warp / O), o = (int)(warp - (long long)b * O);
    const float* __restrict__ w = W2 + (long long)o * H;
    const float* __restrict__ hb = h + (long long)b * H;
    float acc = 0.f;
    for (int k = lane; k < H; k += 32) acc = fmaf(hb[k], w[k], acc);
    acc = warp_sum(acc);
    if (lane == 0) y[(long long)b * O + o] = acc + b2[o];
}

torch::Tensor rnn_forward(torch::Tensor x, torch::Tensor h0, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2,
                          torch::Tensor b2) {
    CHECK_F32(x);
    CHECK_F32(h0);
    CHECK_F32(w1);
    CHECK_F32(b1);
    CHECK_F32(w2);
    CHECK_F32(b2);
    TORCH_CHECK(x.dim() == 3 && h0.dim() == 2 && w1.dim() == 2 && w2.dim() == 2, "expected x (T, B, I), h0 (B, H)");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto stream = at::cuda::getCurrentCUDAStream();
    auto xc = x.contiguous();
    auto hc = h0.contiguous();
    auto w1c = w1.contiguous();
    auto w2c = w2.contiguous();
    auto b1c = b1.contiguous();
    auto b2c = b2.contiguous();
    const long long T = xc.size(0), B = xc.size(1), I = xc.size(2);
    const long long H = w1c.size(0), O = w2c.size(0);
    TORCH_CHECK(w1c.size(1) == I + H, "i2h weight must be (hidden, input + hidden)");
    TORCH_CHECK(w2c.size(1) == H, "h2o weight must be (output, hidden)");
    TORCH_CHECK(hc.size(0) == B && hc.size(1) == H, "h0 must be (batch, hidden)");
    TORCH_CHECK(b1c.numel() == H && b2c.numel() == O, "bias sizes");
    auto out = torch::empty({T, B, O}, xc.options());
    if (T == 0 || B == 0) return out;
    auto hA = torch::empty({B, H}, xc.options());
    auto hB = torch::empty({B, H}, xc.options());
    const long long hid_blocks = (B * H * 32 + 255) / 256;
    const long long out_blocks = (B * O * 32 + 255) / 256;
    const float* hprev = hc.data_ptr<float>();
    for (long long t = 0; t < T; ++t) {
        float* hnext = (t % 2 == 0) ? hA.data_ptr<float>() : hB.data_ptr<float>();
        if (H > 0)
            rnn_hidden_kernel<<<(unsigned int)hid_blocks, 256, 0, stream>>>(
                xc.data_ptr<float>() + t * B * I, hprev, w1c.data_ptr<float>(), b1c.data_ptr<float>(), hnext,
                (int)B, (int)I, (int)H);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        if (O > 0)
            rnn_output_kernel<<<(unsigned int)out_blocks, 256, 0, stream>>>(
                hnext, w2c.data_ptr<float>(), b2c.data_ptr<float>(), out.data_ptr<float>() + t * B * O,
                (int)B, (int)H, (int)O);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        hprev = hnext;
    }
    return out;
}
"""

cpp_src = r"""
torch::Tensor rnn_forward(torch::Tensor x, torch::Tensor h0, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2,
                          torch::Tensor b2);
"""

module = load_inline(
    name="kbc_l3_vanilla_rnn_hidden",
    cpp_sources=cpp_src,
    cuda_sources=cuda_src,
    functions=["rnn_forward"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.i2h = nn.Linear(input_size + hidden_size, hidden_size)  # parameter holder only
        self.h2o = nn.Linear(hidden_size, output_size)  # parameter holder only
        self.tanh = nn.Tanh()  # kept for module parity; never called

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        return module.rnn_forward(x, h0, self.i2h.weight, self.i2h.bias, self.h2o.weight, self.h2o.bias)
