"""Each verification's device work runs on a CUDA stream of its own (GPU only): threads of one process must not wait
for each other's queued work when they synchronise."""

from __future__ import annotations

import threading

import pytest
import torch

from musacoder.judge.pipeline import own_stream

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_each_thread_gets_its_own_stream_and_gets_the_default_back():
    default = torch.cuda.current_stream(0)
    seen = {}

    def run(name):
        with own_stream("cuda:0"):
            seen[name] = torch.cuda.current_stream(0)
            x = torch.randn(1 << 20, device="cuda:0")
            seen[name + "_sum"] = float(x.double().sum())  # a synchronising read on that stream
        seen[name + "_after"] = torch.cuda.current_stream(0)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["a"] != default and seen["b"] != default and seen["a"] != seen["b"]
    assert seen["a_after"] == default and seen["b_after"] == default


def test_a_synchronising_read_does_not_wait_for_another_stream_s_work():
    """A long spin queued on one verification's stream; a read on another's returns long before it ends."""
    import time

    done = threading.Event()
    float(torch.ones(16, device="cuda:0").sum())  # the kernels the read uses loaded first: a first launch loads its
    # module lazily, which may wait for the device's running work, whatever the stream

    def spin():
        with own_stream("cuda:0"):
            torch.cuda._sleep(2_000_000_000)  # about a second at 2 GHz
            torch.cuda.current_stream(0).synchronize()
        done.set()

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.05)
    with own_stream("cuda:0"):
        t0 = time.monotonic()
        float(torch.ones(16, device="cuda:0").sum())
        waited = time.monotonic() - t0
    assert not done.is_set() and waited < 0.5
    t.join()
