"""The task cache's host copies (`inputs.to_host`, `HostTensor`): contiguous tensors kept as byte chunks of
`HOST_CHUNK_BYTES` (page-locked on a GPU host, pageable where that cannot be had), back whole on a device with their
values, dtype and shape; what cannot be viewed as bytes is copied as before."""

import torch

from musacoder.judge import inputs
from musacoder.judge.inputs import HostTensor, nbytes, to_device, to_host


def test_tensors_come_back_whole_across_chunks_with_their_dtype_and_shape(monkeypatch):
    monkeypatch.setattr(inputs, "HOST_CHUNK_BYTES", 1000)  # several chunks and a short last one
    torch.manual_seed(0)
    made = [torch.randn(7, 33, 5), torch.randn(1000, dtype=torch.float64), torch.rand(300) > 0.5,
            torch.randint(-9, 9, (17, 19)), torch.randn(40, 41).to(torch.bfloat16), torch.tensor(3.5)]
    kept = to_host(made, pinned=True)  # no GPU here: pageable chunks
    assert all(isinstance(k, HostTensor) for k in kept)
    assert len(kept[0].chunks) == -(-made[0].nbytes // 1000) and all(c.numel() <= 1000 for c in kept[0].chunks)
    assert nbytes(kept) == nbytes(made)
    back = to_device(kept, "cpu")
    assert isinstance(back, list)
    for a, b in zip(made, back):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    again = to_device(kept, "cpu")
    assert again[0].data_ptr() != back[0].data_ptr()  # each asker gets its own copy
    back[0].add_(1)
    assert torch.equal(to_device(kept, "cpu")[0], made[0])  # the kept chunks are not the copy's


def test_a_tensor_that_is_not_contiguous_or_empty_is_copied_as_it_is():
    t = torch.randn(8, 6).t()
    kept = to_host((t, torch.empty(0, 3), 5), pinned=False)
    assert isinstance(kept, tuple) and kept[2] == 5
    assert isinstance(kept[0], torch.Tensor) and kept[0].stride() == t.stride() and torch.equal(kept[0], t)
    assert isinstance(kept[1], torch.Tensor) and kept[1].shape == (0, 3)
    back = to_device(kept, "cpu")
    assert torch.equal(back[0], t) and back[2] == 5


def test_the_cache_s_yardsticks_come_back_the_same_from_chunks_as_from_a_tensor(monkeypatch):
    """`_kept_yardsticks` with `pinned` keeps each float64 reference's float32 difference as a HostTensor; back on the
    device it gives the same float64 reference as the plain host copy does."""
    from musacoder.judge.compare import Precision, Yardstick
    from musacoder.judge.stages.correctness import _kept_yardsticks, _yardsticks_back

    monkeypatch.setattr(inputs, "HOST_CHUNK_BYTES", 4096)
    torch.manual_seed(1)
    r64 = torch.randn(64, 70, dtype=torch.float64)
    out = r64.float()
    precision = Precision()
    precision.leaves["output"] = Yardstick(r64, 1e-7, 1e-3, 1e-6, 1e-3)
    plain, chunked = _kept_yardsticks(precision, out), _kept_yardsticks(precision, out, pinned=True)
    assert isinstance(chunked.leaves["output"].ref64, HostTensor) and chunked.leaves["output"].ref64.dtype == torch.float32
    a = _yardsticks_back(plain, out, "cpu").leaves["output"].ref64
    b = _yardsticks_back(chunked, out, "cpu").leaves["output"].ref64
    assert a.dtype == b.dtype == torch.float64 and torch.equal(a, b)


def test_a_large_kept_timing_output_goes_to_host_chunks_and_is_handed_over_whole(monkeypatch):
    """The worker's kept outputs at or above `host_hold_bytes` (`_TimedRun.keep`) are host chunks; `take_outputs`
    hands each over as a plain tensor (through the pipe, and again on `resend`), none of its memory shared with what
    the worker still holds."""
    from types import SimpleNamespace

    from musacoder.judge.messages import TakeOutputsRequest
    from musacoder.judge.worker import timing_ops
    from musacoder.judge.worker.calls import handle_resend

    monkeypatch.setattr(inputs, "HOST_CHUNK_BYTES", 512)
    torch.manual_seed(2)
    big, small = torch.randn(40, 50), torch.randn(3)
    held = {4: timing_ops._to_host((big, small)), 9: None}
    assert isinstance(held[4][0], HostTensor) and len(held[4][0].chunks) == -(-big.nbytes // 512)
    worker = SimpleNamespace(held=held, last_outputs=None, device="cpu")
    reply = timing_ops.handle_take_outputs(worker, TakeOutputsRequest(rounds=[4, 9]))
    got = reply["outputs"]
    assert got[9] is None and isinstance(got[4], tuple) and all(isinstance(t, torch.Tensor) for t in got[4])
    assert torch.equal(got[4][0], big) and torch.equal(got[4][1], small) and worker.held == {}
    again = handle_resend(worker, None)["outputs"]
    assert torch.equal(again[4][0], big) and again[4][0].data_ptr() != got[4][0].data_ptr()


def test_writes_fill_fresh_chunks_in_pieces_that_straddle_them(monkeypatch):
    """`HostTensor.empty` + `write`: pieces of any size, at any element offset, land across chunk edges; a piece that
    runs past the end or has another dtype is refused."""
    import pytest

    monkeypatch.setattr(inputs, "HOST_CHUNK_BYTES", 1000)  # 250 float32 per chunk
    torch.manual_seed(2)
    whole = torch.randn(31, 37)
    kept = HostTensor.empty((31, 37), torch.float32, pinned=True)
    assert kept.nbytes == whole.nbytes and len(kept.chunks) == -(-whole.nbytes // 1000)
    flat = whole.reshape(-1)
    for at in range(0, flat.numel(), 333):  # pieces of 333 elements straddle the 250-element chunks
        kept.write(at, flat[at:at + 333])
    assert torch.equal(kept.to_device("cpu"), whole)
    with pytest.raises(ValueError):
        kept.write(flat.numel() - 5, flat[:10])
    with pytest.raises(ValueError):
        kept.write(0, flat[:10].double())


def test_the_float64_difference_is_written_straight_into_chunks(monkeypatch):
    """`ref64_delta(into=...)` fills the given chunks and returns them: the same values as the plain host tensor, and
    None (nothing kept) where the difference cannot stand for the float64 reference."""
    from musacoder.judge import compare
    from musacoder.judge.compare import ref64_delta

    monkeypatch.setattr(inputs, "HOST_CHUNK_BYTES", 4096)
    monkeypatch.setattr(compare, "CHUNK", 700)  # comparison chunks that do not line up with the host ones
    torch.manual_seed(3)
    r64 = torch.randn(90, 41, dtype=torch.float64)
    r32 = r64.float()
    into = HostTensor.empty(tuple(r64.shape), torch.float32, pinned=True)
    got = ref64_delta(r32, r64, into)
    assert got is into and torch.equal(got.to_device("cpu"), ref64_delta(r32, r64))
    r64[3, 4] = 1e300  # beyond float32's range
    assert ref64_delta(r32, r64, HostTensor.empty(tuple(r64.shape), torch.float32, pinned=True)) is None


def test_an_output_spec_gives_its_tensors_bytes_and_a_malformed_part_none():
    from musacoder.judge.inputs import output_spec, spec_bytes, spec_tensors

    out = (torch.zeros(3, 5), [torch.zeros(7, dtype=torch.float64), 2.0], torch.zeros(0))
    spec = output_spec(out)
    assert spec_tensors(spec) == [((3, 5), torch.float32), ((7,), torch.float64), ((0,), torch.float32)]
    assert spec_bytes(spec) == 3 * 5 * 4 + 7 * 8
    assert spec_bytes(["tensor", [4], "no_such_dtype"]) == 0 and spec_bytes(None) == 0 and spec_bytes(["seq"]) == 0


def test_reserving_host_memory_page_locks_the_chunks_to_host_will_ask_for(monkeypatch):
    """`reserve_host`: the worker's kept outputs later take page-locked blocks freed here (torch's host allocator
    keeps them); with no GPU nothing can be page-locked, and it says so (0 bytes) rather than fail."""
    from musacoder.judge.inputs import output_spec, reserve_host
    from musacoder.judge.messages import ReservedReply, ReserveHostRequest, from_wire, parse
    from musacoder.judge.worker.timing_ops import handle_reserve_host

    made = []
    real_empty = HostTensor.empty.__func__

    def recording(cls, shape, dtype, pinned):
        made.append((shape, dtype, pinned))
        return real_empty(cls, shape, dtype, pinned)

    monkeypatch.setattr(HostTensor, "empty", classmethod(recording))
    spec = output_spec([torch.zeros(4, 6), torch.zeros(2, dtype=torch.int64)])
    assert reserve_host(spec, 3) == (3 * (4 * 6 * 4 + 2 * 8) if torch.cuda.is_available() else 0)
    assert made == [((4, 6), torch.float32, True), ((2,), torch.int64, True)] * 3
    req = from_wire(ReserveHostRequest(expect=spec, copies=1000).to_wire())
    reply = parse(handle_reserve_host(None, req), ReservedReply)
    assert isinstance(reply, ReservedReply) and len(made) == 6 + 2 * 16  # copies capped at 16
