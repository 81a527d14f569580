"""Peak memory of the trainer's log-prob computation (forward + backward), unchunked against chunked, on a CPU.

A one-layer Llama with a Qwen2.5-sized vocabulary (152,064) and a tiny hidden size, so the vocabulary-wide logits
dominate; each measurement runs in its own process and reads the growth of its peak resident memory
(`ru_maxrss`), which is what the logits cost. Prints a table and the bytes per materialised logits element, the
factor docs/rl.md scales to the documented kernel config.

    python benchmarks/logprob_memory.py                 # rows 2, response lengths 1024 and 2048, chunk 256

Rows go to --json (default logprob_memory.json) as they come.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

VOCAB = 152_064


def measure(mode: str, rows: int, length: int, chunk: int) -> dict:
    import resource

    import torch
    import transformers

    from musacoder.rl.trainer import response_log_probs

    torch.manual_seed(0)
    conf = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                    num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=length + 64)
    model = transformers.LlamaForCausalLM(conf)
    chunk_size = None if mode == "unchunked" else chunk

    def run(contexts, responses):
        logp, _ = response_log_probs(model, contexts, responses, 0.9, 0, chunk_size)
        logp.sum().backward()
        model.zero_grad(set_to_none=True)

    run([[5] * 4], [[7] * 4])  # warm-up: libraries and allocator pages belong to the baseline
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    run([[5] * 16] * rows, [[7] * length] * rows)
    growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    at_once = rows * (length if chunk_size is None else min(chunk, length)) * VOCAB
    return {"mode": mode, "rows": rows, "length": length, "chunk": chunk_size, "peak_growth_bytes": growth,
            "elements_at_once": at_once, "bytes_per_element": growth / at_once}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2)
    ap.add_argument("--lengths", default="1024,2048")
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--json", type=Path, default=Path("logprob_memory.json"), help="Where the rows are written.")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # internal: mode length, in a child process
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one[0], args.rows, int(args.one[1]), args.chunk)))
        return
    rows = []
    print(f"{'mode':<10} {'rows':>4} {'length':>6} {'chunk':>5} {'peak growth MiB':>16} {'B/element':>9}")
    for length in [int(x) for x in args.lengths.split(",")]:
        for mode in ("unchunked", "chunked"):
            out = subprocess.run([sys.executable, __file__, "--rows", str(args.rows), "--chunk", str(args.chunk),
                                  "--one", mode, str(length)], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(r)
            args.json.write_text(json.dumps(rows, indent=1) + "\n")  # after every row: a cut run keeps them
            print(f"{mode:<10} {r['rows']:>4} {length:>6} {str(r['chunk'] or '-'):>5} "
                  f"{r['peak_growth_bytes'] / 2**20:>16.0f} {r['bytes_per_element']:>9.1f}")


if __name__ == "__main__":
    main()
