"""RFT: kernel tokens invariant to names and constants, clustering, pools (one per cluster, fastest, capped), and the
`draw_epoch` contract the SFT trainer relies on."""

from __future__ import annotations

from collections import Counter

import pytest

from musacoder.data.rft import build_pool, cluster, draw_epoch, kernel_similarity, kernel_tokens

LOOP = '''```python
import torch
from torch.utils.cpp_extension import load_inline
src = r"""
#include <torch/extension.h>
// elementwise relu, one loop
torch::Tensor {fn}(torch::Tensor x) {{
    auto out = torch::empty_like(x);
    const float* a = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {{ o[i] = a[i] > {zero} ? a[i] : {zero}; }}
    return out;
}}
"""
{ext} = load_inline(name="{name}", cpp_sources=src, functions=["{fn}"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return {ext}.{fn}(x)
```'''

BLOCKED = '''```python
import torch
from torch.utils.cpp_extension import load_inline
src = r"""
#include <torch/extension.h>
#include <algorithm>
torch::Tensor relu_blocked(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int64_t block = 256;
    #pragma omp parallel for
    for (int64_t b = 0; b < (n + block - 1) / block; ++b) {
        const int64_t end = std::min(n, (b + 1) * block);
        for (int64_t j = b * block; j < end; ++j) out.data_ptr<float>()[j] = std::max(xc.data_ptr<float>()[j], 0.0f);
    }
    return out;
}
"""
mod = load_inline(name="relu_blocked", cpp_sources=src, functions=["relu_blocked"], extra_cflags=["-fopenmp"])
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return mod.relu_blocked(x)
```'''


def loop(fn="relu_fwd", ext="ext", name="relu_a", zero="0.f"):
    return LOOP.format(fn=fn, ext=ext, name=name, zero=zero)


def test_tokens_rename_made_up_names_and_numbers_keep_vocabulary():
    toks = kernel_tokens("__global__ void my_k(float* a, int n) { a[threadIdx.x] = 2.5f; } x.data_ptr")
    assert toks[:3] == ["__global__", "void", "v0"]
    assert "threadIdx" in toks and "0" in toks and "2.5f" not in toks and "data_ptr" in toks
    assert "elementwise" not in kernel_tokens("// elementwise\nint a;")  # comments dropped


def test_similarity_same_algorithm_other_names_is_one_and_other_structure_low():
    a, b = loop(), loop(fn="my_relu", ext="kernels", name="k2", zero="0.0f")
    assert kernel_similarity(a, b) == pytest.approx(1.0)
    assert kernel_similarity(a, BLOCKED) < 0.5
    assert kernel_similarity(a, "<think>plan</think>\n" + a) == pytest.approx(1.0)  # reasoning is not code


def test_cluster_greedy_leaders():
    a, b, c = frozenset({1, 2, 3, 4}), frozenset({1, 2, 3, 5}), frozenset({9})
    # J(a,b) = 3/5 = 0.6
    assert cluster([a, b, c, a], 0.6) == [0, 0, 1, 0]
    assert cluster([a, b, c, a], 0.61) == [0, 1, 2, 0]


def test_pool_one_fastest_member_per_cluster_largest_clusters_first():
    accepted = [{"response": loop(), "sample": 0, "speedup": 1.0},
                {"response": loop(fn="g"), "sample": 3, "speedup": 1.4},
                {"response": BLOCKED, "sample": 1, "speedup": 0.9},
                {"response": loop(fn="h"), "sample": 2, "speedup": None}]
    pool = build_pool(accepted, cap=4, threshold=0.8)
    assert [(m["cluster"], m["cluster_size"], m["sample"]) for m in pool] == [(0, 3, 3), (1, 1, 1)]
    assert pool[0]["speedup"] == 1.4
    assert [m["sample"] for m in build_pool(accepted, cap=1, threshold=0.8)] == [3]
    with pytest.raises(ValueError, match="cap"):
        build_pool(accepted, cap=0, threshold=0.8)


ROWS = [{"task": f"t{i}", "prompt": [{"role": "system", "content": "s"}, {"role": "user", "content": f"u{i}"}],
         "pool": [{"response": f"r{i}.{j}", "sample": j} for j in range(3)]} for i in range(40)]


def test_draw_epoch_contract():
    e0 = draw_epoch(ROWS, 0, seed=7)
    assert len(e0) == len(ROWS)
    for row, drawn in zip(ROWS, e0):  # one conversation per row, in order: the prompt then a pool member
        assert drawn["messages"][:2] == row["prompt"] and drawn["messages"][2]["role"] == "assistant"
        assert drawn["messages"][2]["content"] in {m["response"] for m in row["pool"]}
        assert drawn["loss_turn"] is None and drawn["task"] == row["task"]
    assert draw_epoch(ROWS, 0, seed=7) == e0  # deterministic
    e1 = draw_epoch(ROWS, 1, seed=7)
    assert sum(a["sample"] != b["sample"] for a, b in zip(e0, e1)) > 10  # a new draw per epoch
    assert draw_epoch(ROWS[:10], 3, seed=1) == draw_epoch(ROWS, 3, seed=1)[:10]  # independent of the other rows
    counts = Counter(d["sample"] for e in range(30) for d in draw_epoch(ROWS, e, seed=0))
    assert set(counts) == {0, 1, 2} and min(counts.values()) > 300  # uniform-ish over 1200 draws
    assert ROWS[0]["prompt"][1] == {"role": "user", "content": "u0"}  # input untouched


def test_draw_epoch_rejects_empty_pools():
    with pytest.raises(ValueError, match="row 1 .*empty or missing `pool`"):
        draw_epoch([ROWS[0], {"task": "x", "prompt": ROWS[0]["prompt"], "pool": []}], 0, 0)
