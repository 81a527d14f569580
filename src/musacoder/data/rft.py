"""Diversity-preserving rejection fine-tuning (RFT): k samples per task, the accepted ones clustered per prompt by
the structure of their kernels, one member per cluster kept (at most `cap` clusters), and at training time a random
member drawn each epoch (`draw_epoch`) instead of always the fastest.

Structural similarity (`kernel_tokens`, `kernel_similarity`): the candidate's code (the extracted ```python block,
C++/CUDA sources inside it included) without comments, split into tokens; numbers become `0`; names the candidate
makes up (kernels, variables, arguments: names used somewhere outside an attribute or namespace position) become
`v0, v1, …` in order of first appearance, while keywords, the CUDA/C++/torch vocabulary, other attributes
(`.data_ptr`) and namespace-qualified names (`torch::empty`) are kept. Two kernels' similarity is the Jaccard
index of their sets of token 4-grams (`musacoder.data.textsim.jaccard`): the same algorithm with other names or
constants scores 1, a different tiling or loop structure much lower (a one-loop and a blocked OpenMP ReLU: 0.19).

Clustering (`cluster`) is greedy and deterministic: members in sample order, each joins the first cluster whose
first member (its leader) is at least `threshold` similar, else starts a new one.
"""

from __future__ import annotations

import hashlib
import keyword
import random
import re
from collections.abc import Sequence
from typing import Any

from musacoder.data.textsim import jaccard, shingles

NGRAM = 4
_CXX_WORDS = set("""alignas alignof auto bool break case catch char const constexpr continue default delete do double
else enum explicit extern false float for friend goto if inline int long namespace new noexcept nullptr operator
private protected public register reinterpret_cast return short signed sizeof static static_cast struct switch
template this throw true try typedef typename union unsigned using virtual void volatile while size_t int64_t
int32_t uint32_t uint64_t half float4 float2 dim3 include pragma omp parallel unroll define ifdef endif
__global__ __device__ __host__ __shared__ __syncthreads __restrict__ __forceinline__ __launch_bounds__ threadIdx
blockIdx blockDim gridDim warpSize atomicAdd __shfl_down_sync __shfl_xor_sync expf exp logf log sqrtf rsqrtf tanhf
fmaxf fminf max min fabsf powf std torch at c10 Tensor TORCH_CHECK load_inline cpp_sources cuda_sources
musa_sources functions extra_cflags extra_cuda_cflags name triton tl jit program_id arange load store constexpr
nn Module ModelNew Model forward self super import from as class def lambda None True False""".split())
_KEEP = _CXX_WORDS | set(keyword.kwlist)
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[fF]?|::|->|<<|>>|[^\s\w]")
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*|#(?!\s*(?:include|pragma|define|if|endif))[^\n]*", re.S)


def kernel_code(response: str) -> str:
    """The code the similarity looks at: the extracted candidate, or the response without its reasoning."""
    from musacoder.candidates import extract_code, strip_think

    cand = extract_code(response)
    return cand.code if cand.code else strip_think(response)


def kernel_tokens(code: str) -> list[str]:
    """Normalised tokens of a candidate's code (see the module docstring)."""
    raw = _TOKEN.findall(_COMMENTS.sub(" ", code))

    def is_name(tok: str) -> bool:
        return tok[0].isalpha() or tok[0] == "_"

    # made-up names: used somewhere outside an attribute or namespace position (`ext.my_fn` renames `my_fn` too)
    local = {tok for i, tok in enumerate(raw) if is_name(tok) and tok not in _KEEP
             and (raw[i - 1] if i else "") not in (".", "::") and (raw[i + 1] if i + 1 < len(raw) else "") != "::"}
    names: dict[str, str] = {}
    out = []
    for tok in raw:
        if tok[0].isdigit():
            out.append("0")
        elif is_name(tok) and tok in local:
            out.append(names.setdefault(tok, f"v{len(names)}"))
        else:
            out.append(tok)
    return out


def kernel_signature(response: str) -> frozenset[int]:
    """Hashed token 4-grams of a response's kernel code."""
    return shingles(kernel_tokens(kernel_code(response)), NGRAM)


def kernel_similarity(a: str, b: str) -> float:
    """Structural similarity of two responses in [0, 1] (Jaccard of their kernel 4-gram sets)."""
    return jaccard(kernel_signature(a), kernel_signature(b))


def cluster(signatures: Sequence[frozenset[int]], threshold: float) -> list[int]:
    """Cluster label of each item (0, 1, … in order of first appearance): item i joins the first cluster whose
    leader (first member) has Jaccard(i, leader) ≥ threshold, else founds a new cluster."""
    leaders: list[int] = []
    labels = []
    for i, sig in enumerate(signatures):
        for c, leader in enumerate(leaders):
            if jaccard(sig, signatures[leader]) >= threshold:
                labels.append(c)
                break
        else:
            leaders.append(i)
            labels.append(len(leaders) - 1)
    return labels


def build_pool(accepted: Sequence[dict[str, Any]], *, cap: int, threshold: float) -> list[dict[str, Any]]:
    """The pool of one prompt from its accepted samples (`{"response", "sample", "speedup"}`, any order).

    Samples are clustered (`cluster`, in sample order); each cluster is represented by its fastest member (largest
    `speedup`, untimed last, then the lowest sample); the `cap` largest clusters are kept (ties: the earlier
    cluster). Each pool member: `response`, `sample`, `cluster`, `cluster_size`, `speedup`."""
    if cap < 1:
        raise ValueError(f"cap must be ≥ 1, got {cap}")
    items = sorted(accepted, key=lambda a: a["sample"])
    labels = cluster([kernel_signature(a["response"]) for a in items], threshold)
    groups: dict[int, list[dict[str, Any]]] = {}
    for label, item in zip(labels, items):
        groups.setdefault(label, []).append(item)
    order = sorted(groups, key=lambda c: (-len(groups[c]), c))[:cap]
    pool = []
    for c in order:
        members = groups[c]
        best = max(members, key=lambda a: (a.get("speedup") is not None, a.get("speedup") or 0.0, -a["sample"]))
        pool.append({"response": best["response"], "sample": int(best["sample"]), "cluster": c,
                     "cluster_size": len(members), "speedup": best.get("speedup")})
    return pool


def _draw_index(seed: int, epoch: int, i: int, task: str, n: int) -> int:
    digest = hashlib.sha256(f"{seed}|{epoch}|{i}|{task}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little")).randrange(n)


def draw_epoch(rows: Sequence[dict[str, Any]], epoch: int, seed: int) -> list[dict[str, Any]]:
    """The conversations of one training epoch from RFT rows: one chat row per RFT row, in the same order.

    Each RFT row holds `prompt` (the first-turn messages, a list of {"role", "content"}) and `pool` (a non-empty list
    of {"response", …}; see docs/data.md, *Schema*). For row i, the member drawn is uniform over the pool, from a
    generator seeded by (seed, epoch, i, row["task"]): the same arguments always give the same draws, another epoch
    draws anew, and the draw does not depend on the other rows. Returned rows: `messages` = prompt + the member's
    `response` as the assistant turn, `loss_turn` None (the last message carries the loss), plus `task` and the
    member's `sample` for tracing. Pure: no I/O, the input rows are not modified.

    Raises ValueError, naming the row, for a row without `prompt` or with an empty `pool`.
    """
    out = []
    for i, row in enumerate(rows):
        pool, prompt = row.get("pool"), row.get("prompt")
        if not pool:
            raise ValueError(f"RFT row {i} ({row.get('task', '?')}) has an empty or missing `pool`; rebuild the "
                             "dataset with `musacoder data rft` (tasks with no accepted sample are left out there)")
        if not prompt:
            raise ValueError(f"RFT row {i} ({row.get('task', '?')}) has no `prompt` messages")
        member = pool[_draw_index(seed, epoch, i, str(row.get("task", "")), len(pool))]
        messages = [{"role": m["role"], "content": m["content"]} for m in prompt]
        messages.append({"role": "assistant", "content": member["response"]})
        out.append({"messages": messages, "loss_turn": None, "task": row.get("task"), "sample": member.get("sample")})
    return out


# ---- edge: the pool dataset from a verified sampling run ------------------------------------------------------

RFT_COLUMNS = {
    "task": "task key",
    "prompt": "list of {role, content}: the first-turn messages",
    "pool": "list of {response, sample, cluster, cluster_size, speedup}: one accepted response per structural "
            "cluster, at most the cap; `draw_epoch` draws one per epoch",
    "accepted": "accepted samples of the task (before clustering)",
    "clusters": "clusters among them",
}


RFT_ROWS = "rft.jsonl"  # the pool rows again, what `musacoder train sft|rft` reads from `out`


def build_rft(run_dir, out, *, cap: int, threshold: float, made_by: str = "",
              inputs: dict[str, str] | None = None) -> dict[str, int]:
    """Write the RFT dataset `out/rft/` (Parquet + card) from a verified single-turn run: one row per task with at
    least one accepted sample; the same rows in `out/rft.jsonl` and the stage manifest `out/musacoder.json` naming
    it. Returns counts (tasks, tasks_with_pool, accepted, pooled)."""
    from pathlib import Path

    from musacoder.data.dataset import folder_relative, write_data_manifest, write_dataset, write_jsonl
    from musacoder.data.runs import load_run

    run = load_run(Path(run_dir))
    rows = []
    accepted_total = 0
    for key in sorted(run):
        accepted = [{"response": t.response, "sample": t.sample, "speedup": t.speedup}
                    for t in run[key]["turns"] if t.turn == 1 and t.passed]
        accepted_total += len(accepted)
        if not accepted:
            continue
        pool = build_pool(accepted, cap=cap, threshold=threshold)
        n_clusters = len(set(cluster([kernel_signature(a["response"]) for a in
                                      sorted(accepted, key=lambda a: a["sample"])], threshold)))
        rows.append({"task": key, "prompt": run[key]["prompt"], "pool": pool, "accepted": len(accepted),
                     "clusters": n_clusters})
    write_dataset(rows, Path(out) / "rft", title="musacoder RFT pools",
                  description=f"Diversity-preserving RFT pools from the verified sampling run `{run_dir}`: per task, "
                              f"the accepted samples clustered by kernel structure (4-gram Jaccard ≥ {threshold}), "
                              f"the fastest of each cluster, at most {cap} clusters. Train with "
                              "`musacoder train sft` (it draws a random pool member per epoch through "
                              "`musacoder.data.rft.draw_epoch`).",
                  columns=RFT_COLUMNS, made_by=made_by or f"musacoder data rft … --out {out}")
    counts = {"tasks": len(run), "tasks_with_pool": len(rows), "accepted": accepted_total,
              "pooled": sum(len(r["pool"]) for r in rows)}
    write_jsonl(rows, Path(out) / RFT_ROWS)
    write_data_manifest(Path(out), files={"sft": RFT_ROWS, "rft": "rft/data.parquet",
                                          "run": folder_relative(run_dir, out)},
                        inputs={"run": str(run_dir), **(inputs or {})},
                        info={"command": made_by, "rows": {"rft": len(rows)}, **counts})
    return counts
