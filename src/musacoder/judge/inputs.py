"""Inputs for correctness trials and timing rounds, reproducible from a seed in both processes.

`make_inputs(module, seed, perturb)` calls the task's `get_inputs()` under `torch.manual_seed(seed)`; with `perturb`,
every floating input x becomes x·exp(0.5·z) with z ~ N(0, 1) drawn from the same seeded stream: signs (and so
positivity constraints) are kept, but the values are no longer uniform, so a candidate that computes part of a
reduction and relies on uniform inputs converging to the expected value fails.
"""

from __future__ import annotations

import contextlib
import threading

import torch

# torch's default generator is process-global: verifications running in parallel threads must not interleave
# "seed, then draw", or two of them would draw from each other's streams and disagree with their workers.
_RNG_LOCK = threading.RLock()


@contextlib.contextmanager
def seeded(seed: int, device: str | torch.device = "cpu"):
    """Run a block on torch's default generators seeded with `seed` (the CPU's, and `device`'s when it is a GPU),
    restoring their states afterwards (thread-safe)."""
    dev = torch.device(device)
    with _RNG_LOCK:
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else [], device_type="cuda"):
            torch.manual_seed(seed)
            yield


def make_inputs(module, seed: int, perturb: bool = False, device: str | torch.device = "cpu") -> list:
    """The task's inputs for `seed`, created on `device` (`get_inputs()` runs under it as the default device, so a GPU
    draws them with its own generator: fast, and the same in every process on that kind of GPU)."""
    dev = torch.device(device)
    with seeded(seed, dev), dev:
        inputs = list(module.get_inputs())
        if perturb:
            gens: dict = {}
            out = []
            for x in inputs:
                if isinstance(x, torch.Tensor) and x.is_floating_point():
                    g = gens.get(x.device)
                    if g is None:
                        g = gens[x.device] = torch.Generator(device=x.device).manual_seed(seed ^ 0x5DEECE66D)
                    z = torch.randn(x.shape, generator=g, dtype=torch.float32, device=x.device).to(x.dtype)
                    x = x * torch.exp(0.5 * z)
                out.append(x)
            inputs = out
        return inputs


def make_init_inputs(module, seed: int) -> list:
    with seeded(seed):
        return list(module.get_init_inputs())


def to_device(obj, device: str):
    """Clone every tensor onto `device` (the candidate always gets its own copies)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to(device=device, copy=True)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(x, device) for x in obj)
    return obj


def to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_cpu(x) for x in obj)
    return obj


def seed_for(master: int, *parts: int) -> int:
    """A derived 63-bit seed (splitmix64 of the master and the parts)."""
    x = master & 0xFFFFFFFFFFFFFFFF
    for p in parts:
        x = (x ^ (p + 0x9E3779B97F4A7C15 + (x << 6) + (x >> 2))) & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x = (x ^ (x >> 27)) * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    return x & 0x7FFFFFFFFFFFFFFF
