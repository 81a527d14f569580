import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def launch_1d(kernel, n, *args, block=1024):
    kernel[(triton.cdiv(n, block),)](*args, n, BLOCK=block)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        launch_1d(add_kernel, out.numel(), a.contiguous(), b.contiguous(), out)
        return out
