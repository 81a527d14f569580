"""The L2 flush before each timed call: sized from the device's L2 cache, skipped where the task's data dwarf it."""

import torch

from musacoder.judge.timing import L2_DWARFED, Timer, l2_flush_bytes

MB = 1 << 20


def test_the_flush_is_twice_the_l2_and_none_where_the_data_dwarf_it():
    l2 = 50 * MB  # an H100's
    assert l2_flush_bytes(l2, 4 * MB) == 100 * MB
    assert l2_flush_bytes(l2, None) == 100 * MB  # the task's size unknown: flushed
    assert l2_flush_bytes(l2, L2_DWARFED * l2 - 1) == 100 * MB
    assert l2_flush_bytes(l2, L2_DWARFED * l2) == 0  # 800 MB of inputs and outputs stream through the cache anyway
    assert l2_flush_bytes(None, 4 * MB, default=256 * MB) == 256 * MB  # an L2 this torch does not report
    assert l2_flush_bytes(0, 10**12, default=256 * MB) == 256 * MB


def test_a_timer_without_a_flush_times_as_before_on_the_cpu():
    t = Timer(torch, "cpu", 0)
    region, out = t.timed(lambda x: x + 1, (torch.ones(3),))
    assert t.scratch is None and torch.equal(out, torch.full((3,), 2.0)) and region.device_ms >= 0
    t.flush()  # nothing to flush: no error
