"""Self-contained blocks of real architectures (stage 1, part c): the units that models are built from, as whole
tasks, so that kernels learn fusion across the ops a real block chains (projection → activation → projection,
normalisation → attention → residual, convolution → norm → activation → shortcut).

Each block is written the way its architecture's reference implementation writes it (GPT-2 and LLaMA MLPs, causal
self-attention, a pre-norm transformer layer, ResNet basic and bottleneck blocks, MobileNetV2's inverted residual,
squeeze-and-excitation, ConvNeXt's block, ViT's patch embedding, a GRU cell step, U-Net's double convolution),
at CPU-friendly sizes multiplied by `scale`. Variants: `base` (regular sizes) and `odd` (sizes no power-of-two tile
covers). Inputs are float32; normalisation layers stay in training mode as `nn.Module` builds them (batch statistics,
deterministic).
"""

from __future__ import annotations

import random
from typing import Callable

from musacoder.data.catalogue import Sizes
from musacoder.data.records import TaskSpec

VARIANTS = ("base", "odd")


def _seq(sz: Sizes) -> dict:
    """Sizes of a sequence block: batch, sequence length, model width and heads (width divisible by heads)."""
    heads = sz.n((4, 8), (3, 5), fixed=True)
    head_dim = sz.n((32, 64), (24, 40), fixed=True)
    return {"batch_size": sz.n((2, 4), (3, 5)), "seq_len": sz.n((64, 128), (63, 127)), "n_embd": heads * head_dim,
            "n_head": heads}


def _img(sz: Sizes, channels=(32, 64), odd_channels=(24, 40)) -> dict:
    return {"batch_size": sz.n((2, 4), (3, 5)), "channels": sz.n(channels, odd_channels),
            "height": sz.n((24, 32), (23, 31)), "width": sz.n((24, 32), (25, 33))}


def _x(dims: list[str]) -> list[str]:
    return [f"x = torch.randn({', '.join(dims)})", "return [x]"]


SEQ = ["batch_size", "seq_len", "n_embd"]  # the input of a sequence block
IMG = ["batch_size", "channels", "height", "width"]  # the input of an image block
WITH_MATH = ["import math", "import torch", "import torch.nn as nn", "import torch.nn.functional as F"]


def _block(sz: Sizes, name: str, doc: str, input_dims: list[str] | None = None, **fields) -> TaskSpec:
    """A block's `TaskSpec`: kind and family `block`, the variant its sizes were drawn for, and (with `input_dims`)
    one random input `x` of those dims."""
    if input_dims is not None:
        fields["input_lines"] = _x(input_dims)
    return TaskSpec(name=name, family="block", kind="block", variant="odd" if sz.odd else "base", doc=doc, **fields)


_ATTENTION = [  # causal self-attention as GPT-2 writes it, on `h`; leaves the result in `y`
    "B, T, C = h.size()",
    "q, k, v = self.c_attn(h).split(C, dim=2)",
    "q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)",
    "k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)",
    "v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)",
    "att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))",
    "att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))",
    "att = F.softmax(att, dim=-1)",
    "y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)",
    "y = self.c_proj(y)",
]
_ATTENTION_INIT = [
    "self.n_head = n_head",
    "self.c_attn = nn.Linear(n_embd, 3 * n_embd)",
    "self.c_proj = nn.Linear(n_embd, n_embd)",
    "self.register_buffer('bias', torch.tril(torch.ones(seq_len, seq_len)).view(1, 1, seq_len, seq_len))",
]


def _gpt2_mlp(sz: Sizes) -> TaskSpec:
    c = _seq(sz)
    return _block(sz, "GPT2MLP",
                  "GPT-2's MLP: Linear(4x) → GELU(tanh) → Linear.",
                  constants=c, init_args=["n_embd"],
                  init_lines=["self.c_fc = nn.Linear(n_embd, 4 * n_embd)",
                              "self.c_proj = nn.Linear(4 * n_embd, n_embd)"],
                  forward_lines=["return self.c_proj(F.gelu(self.c_fc(x), approximate='tanh'))"],
                  input_dims=SEQ, ops=["linear", "gelu", "linear"])


def _swiglu_mlp(sz: Sizes) -> TaskSpec:
    c = _seq(sz)
    c["hidden"] = sz.n((344, 688), (343, 689))
    return _block(sz, "SwiGLUMLP",
                  "LLaMA's feed-forward: w2(silu(w1(x)) * w3(x)), no biases.", constants=c,
                  init_args=["n_embd", "hidden"],
                  init_lines=["self.w1 = nn.Linear(n_embd, hidden, bias=False)",
                              "self.w2 = nn.Linear(hidden, n_embd, bias=False)",
                              "self.w3 = nn.Linear(n_embd, hidden, bias=False)"],
                  forward_lines=["return self.w2(F.silu(self.w1(x)) * self.w3(x))"],
                  input_dims=SEQ, ops=["linear", "silu", "linear", "mul", "linear"])


def _causal_attention(sz: Sizes) -> TaskSpec:
    c = _seq(sz)
    return _block(sz, "CausalSelfAttention",
                  "GPT-2's masked multi-head self-attention with its input and output projections.",
                  imports=WITH_MATH,
                  constants=c, init_args=["n_embd", "n_head", "seq_len"], init_lines=list(_ATTENTION_INIT),
                  forward_lines=["h = x", *_ATTENTION, "return y"], input_dims=SEQ,
                  ops=["linear", "matmul", "masked_fill", "softmax", "matmul", "linear"])


def _transformer_layer(sz: Sizes) -> TaskSpec:
    c = _seq(sz)
    return _block(sz, "PreNormTransformerLayer",
                  "A GPT-2 layer: x + attn(ln_1(x)), then x + mlp(ln_2(x)).",
                  imports=WITH_MATH,
                  constants=c, init_args=["n_embd", "n_head", "seq_len"],
                  init_lines=["self.ln_1 = nn.LayerNorm(n_embd)", *_ATTENTION_INIT, "self.ln_2 = nn.LayerNorm(n_embd)",
                              "self.c_fc = nn.Linear(n_embd, 4 * n_embd)",
                              "self.mlp_proj = nn.Linear(4 * n_embd, n_embd)"],
                  forward_lines=["h = self.ln_1(x)", *_ATTENTION, "x = x + y",
                                 "x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate='tanh'))",
                                 "return x"],
                  input_dims=SEQ,
                  ops=["layer_norm", "linear", "softmax", "linear", "add", "layer_norm", "linear", "gelu", "linear",
                       "add"])


def _rmsnorm_residual(sz: Sizes) -> TaskSpec:
    c = _seq(sz)
    c["eps"] = 1e-6
    return _block(sz, "RMSNormResidual",
                  "LLaMA's residual add followed by RMSNorm: returns (normed, new residual).", constants=c,
                  init_args=["n_embd", "eps"],
                  init_lines=["self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(n_embd))", "self.eps = eps"],
                  forward_args=["x", "residual"],
                  forward_lines=["h = x + residual",
                                 "normed = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)",
                                 "return normed * self.weight, h"],
                  input_lines=["x = torch.randn(batch_size, seq_len, n_embd)",
                               "residual = torch.randn(batch_size, seq_len, n_embd)", "return [x, residual]"],
                  ops=["add", "pow", "mean", "rsqrt", "mul", "mul"])


def _resnet_basic(sz: Sizes) -> TaskSpec:
    c = _img(sz)
    return _block(sz, "ResNetBasicBlock",
                  "ResNet's basic block: conv3x3-BN-ReLU-conv3x3-BN plus the identity, then ReLU.", constants=c,
                  init_args=["channels"],
                  init_lines=["self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)",
                              "self.bn1 = nn.BatchNorm2d(channels)",
                              "self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)",
                              "self.bn2 = nn.BatchNorm2d(channels)"],
                  forward_lines=["out = F.relu(self.bn1(self.conv1(x)))", "out = self.bn2(self.conv2(out))",
                                 "return F.relu(out + x)"],
                  input_dims=IMG,
                  ops=["conv2d", "batch_norm", "relu", "conv2d", "batch_norm", "add", "relu"])


def _bottleneck(sz: Sizes) -> TaskSpec:
    c = _img(sz, (64, 128), (60, 100))
    c["width_mid"] = max(1, c["channels"] // 4)
    return _block(sz, "ResNetBottleneck",
                  "ResNet's bottleneck: 1x1 reduce, 3x3, 1x1 expand, each with BN, identity shortcut, ReLU.",
                  constants=c, init_args=["channels", "width_mid"],
                  init_lines=["self.conv1 = nn.Conv2d(channels, width_mid, 1, bias=False)",
                              "self.bn1 = nn.BatchNorm2d(width_mid)",
                              "self.conv2 = nn.Conv2d(width_mid, width_mid, 3, padding=1, bias=False)",
                              "self.bn2 = nn.BatchNorm2d(width_mid)",
                              "self.conv3 = nn.Conv2d(width_mid, channels, 1, bias=False)",
                              "self.bn3 = nn.BatchNorm2d(channels)"],
                  forward_lines=["out = F.relu(self.bn1(self.conv1(x)))", "out = F.relu(self.bn2(self.conv2(out)))",
                                 "out = self.bn3(self.conv3(out))", "return F.relu(out + x)"],
                  input_dims=IMG,
                  ops=["conv2d", "batch_norm", "relu", "conv2d", "batch_norm", "relu", "conv2d", "batch_norm", "add",
                       "relu"])


def _inverted_residual(sz: Sizes) -> TaskSpec:
    c = _img(sz, (16, 32), (15, 24))
    c["expand"] = sz.rng.choice((4, 6))
    return _block(sz, "InvertedResidual",
                  "MobileNetV2's inverted residual: 1x1 expand-BN-ReLU6, depthwise 3x3-BN-ReLU6, 1x1 project-BN, "
                  "plus the input.", constants=c, init_args=["channels", "expand"],
                  init_lines=["hidden = channels * expand",
                              "self.expand_conv = nn.Conv2d(channels, hidden, 1, bias=False)",
                              "self.bn1 = nn.BatchNorm2d(hidden)",
                              "self.dw = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)",
                              "self.bn2 = nn.BatchNorm2d(hidden)",
                              "self.project = nn.Conv2d(hidden, channels, 1, bias=False)",
                              "self.bn3 = nn.BatchNorm2d(channels)"],
                  forward_lines=["out = F.relu6(self.bn1(self.expand_conv(x)))",
                                 "out = F.relu6(self.bn2(self.dw(out)))",
                                 "return x + self.bn3(self.project(out))"],
                  input_dims=IMG,
                  ops=["conv2d", "batch_norm", "relu6", "conv2d_depthwise", "batch_norm", "relu6", "conv2d",
                       "batch_norm", "add"])


def _squeeze_excitation(sz: Sizes) -> TaskSpec:
    c = _img(sz, (64, 128), (60, 100))
    c["reduced"] = max(4, c["channels"] // 16)
    return _block(sz, "SqueezeExcitation",
                  "Squeeze-and-excitation: global average pool, FC-ReLU-FC-sigmoid, channel-wise rescale.",
                  constants=c, init_args=["channels", "reduced"],
                  init_lines=["self.fc1 = nn.Conv2d(channels, reduced, 1)",
                              "self.fc2 = nn.Conv2d(reduced, channels, 1)"],
                  forward_lines=["s = F.adaptive_avg_pool2d(x, 1)", "s = torch.sigmoid(self.fc2(F.relu(self.fc1(s))))",
                                 "return x * s"],
                  input_dims=IMG,
                  ops=["adaptive_avg_pool2d", "conv2d", "relu", "conv2d", "sigmoid", "mul"])


def _convnext(sz: Sizes) -> TaskSpec:
    c = _img(sz, (32, 64), (24, 40))
    return _block(sz, "ConvNeXtBlock",
                  "ConvNeXt's block: depthwise 7x7, LayerNorm over channels (channels last), Linear 4x, GELU, "
                  "Linear, layer scale, plus the input.", constants=c, init_args=["channels"],
                  init_lines=["self.dwconv = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)",
                              "self.norm = nn.LayerNorm(channels, eps=1e-6)",
                              "self.pwconv1 = nn.Linear(channels, 4 * channels)",
                              "self.pwconv2 = nn.Linear(4 * channels, channels)",
                              "self.gamma = nn.Parameter(0.5 * torch.ones(channels))"],
                  forward_lines=["h = self.dwconv(x).permute(0, 2, 3, 1)",
                                 "h = self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))",
                                 "return x + (self.gamma * h).permute(0, 3, 1, 2)"],
                  input_dims=IMG,
                  ops=["conv2d_depthwise", "permute", "layer_norm", "linear", "gelu", "linear", "mul", "add"])


def _patch_embedding(sz: Sizes) -> TaskSpec:
    patch = sz.rng.choice((4, 8))
    c = {"batch_size": sz.n((2, 4), (3, 5)), "in_chans": 3, "img_size": patch * sz.n((6, 8), (5, 7), fixed=True),
         "patch_size": patch, "embed_dim": sz.n((192, 256), (191, 257))}
    return _block(sz, "ViTPatchEmbedding",
                  "ViT's patch embedding: strided conv, flatten to tokens, prepend the class token, add learned "
                  "position embeddings.",
                  constants=c, init_args=["in_chans", "img_size", "patch_size", "embed_dim"],
                  init_lines=["self.proj = nn.Conv2d(in_chans, embed_dim, patch_size, stride=patch_size)",
                              "n = (img_size // patch_size) ** 2",
                              "self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)",
                              "self.pos_embed = nn.Parameter(torch.randn(1, n + 1, embed_dim) * 0.02)"],
                  forward_lines=["t = self.proj(x).flatten(2).transpose(1, 2)",
                                 "t = torch.cat([self.cls_token.expand(t.shape[0], -1, -1), t], dim=1)",
                                 "return t + self.pos_embed"],
                  input_dims=["batch_size", "in_chans", "img_size", "img_size"],
                  ops=["conv2d", "flatten", "transpose", "cat", "add"])


def _gru_cell(sz: Sizes) -> TaskSpec:
    c = {"batch_size": sz.n((64, 128), (63, 127)), "input_size": sz.n((128, 256), (127, 255)),
         "hidden_size": sz.n((256, 512), (255, 511))}
    return _block(sz, "GRUCellStep",
                  "One GRU step written out: gates from the input and hidden projections, new hidden state.",
                  constants=c, init_args=["input_size", "hidden_size"],
                  init_lines=["self.x2h = nn.Linear(input_size, 3 * hidden_size)",
                              "self.h2h = nn.Linear(hidden_size, 3 * hidden_size)"],
                  forward_args=["x", "h"],
                  forward_lines=["xr, xz, xn = self.x2h(x).chunk(3, dim=1)", "hr, hz, hn = self.h2h(h).chunk(3, dim=1)",
                                 "r = torch.sigmoid(xr + hr)", "z = torch.sigmoid(xz + hz)",
                                 "n = torch.tanh(xn + r * hn)", "return (1 - z) * n + z * h"],
                  input_lines=["x = torch.randn(batch_size, input_size)", "h = torch.randn(batch_size, hidden_size)",
                               "return [x, h]"],
                  ops=["linear", "linear", "sigmoid", "sigmoid", "tanh", "mul", "add"])


def _double_conv(sz: Sizes) -> TaskSpec:
    c = _img(sz, (16, 32), (15, 24))
    c["out_channels"] = sz.n((32, 64), (33, 47))
    return _block(sz, "UNetDoubleConv",
                  "U-Net's double convolution: (conv3x3-BN-ReLU) twice.", constants=c,
                  init_args=["channels", "out_channels"],
                  init_lines=["self.conv1 = nn.Conv2d(channels, out_channels, 3, padding=1, bias=False)",
                              "self.bn1 = nn.BatchNorm2d(out_channels)",
                              "self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)",
                              "self.bn2 = nn.BatchNorm2d(out_channels)"],
                  forward_lines=["x = F.relu(self.bn1(self.conv1(x)))", "return F.relu(self.bn2(self.conv2(x)))"],
                  input_dims=IMG,
                  ops=["conv2d", "batch_norm", "relu", "conv2d", "batch_norm", "relu"])


BLOCKS: dict[str, Callable[[Sizes], TaskSpec]] = {
    "GPT2MLP": _gpt2_mlp, "SwiGLUMLP": _swiglu_mlp, "CausalSelfAttention": _causal_attention,
    "PreNormTransformerLayer": _transformer_layer, "RMSNormResidual": _rmsnorm_residual,
    "ResNetBasicBlock": _resnet_basic, "ResNetBottleneck": _bottleneck, "InvertedResidual": _inverted_residual,
    "SqueezeExcitation": _squeeze_excitation, "ConvNeXtBlock": _convnext, "ViTPatchEmbedding": _patch_embedding,
    "GRUCellStep": _gru_cell, "UNetDoubleConv": _double_conv,
}


def block_task(rng: random.Random, scale: float = 1.0) -> TaskSpec:
    """One block candidate: a block, a variant (`base` or `odd`), sizes."""
    name = rng.choice(sorted(BLOCKS))
    variant = rng.choice(VARIANTS)
    return BLOCKS[name](Sizes(rng, variant, scale))
