"""The float64 reference kept as its float32 difference from the fp32 reference output (`compare.ref64_delta`):
whole again within the stated bound, finite exactly where it was, and kept whole where the difference cannot stand
for it; the precision rule's verdicts on a candidate come out the same either way."""

import math

import torch

from musacoder.judge.compare import Yardstick, compare_tensor, ref64_delta, ref64_from_delta, rel_error


def _bound(ref64, r32):
    return (ref64 - r32.double()).abs() * 2.0 ** -23 + ref64.abs() * 2.0 ** -51 + 2.0 ** -148


def _pair(n=4096, seed=0):
    g = torch.Generator().manual_seed(seed)
    ref64 = torch.randn(n, dtype=torch.float64, generator=g) * torch.logspace(-30, 30, n, dtype=torch.float64)
    return ref64.float(), ref64


def test_whole_again_within_its_bound_on_wide_ranges_and_cancellations():
    r32, ref64 = _pair()
    # an fp32 reference that lost everything in places (a cancellation): its difference is as large as the value
    r32[::7] = 0.0
    r32[1::11] = -r32[1::11]
    ref64[3::13] = 1e-40  # differences in float32's subnormal range
    d = ref64_delta(r32, ref64)
    assert d is not None and d.dtype == torch.float32 and d.device.type == "cpu" and d.shape == ref64.shape
    back = ref64_from_delta(r32, d, "cpu")
    assert back.dtype == torch.float64 and bool(((back - ref64).abs() <= _bound(ref64, r32)).all())
    assert not torch.equal(back, r32.double())  # the difference carries what the fp32 output lacks


def test_non_finite_entries_come_back_where_they_were():
    r32, ref64 = _pair(1024, seed=1)
    ref64[5], ref64[6], ref64[7] = math.inf, -math.inf, math.nan
    r32 = ref64.float()
    back = ref64_from_delta(r32, ref64_delta(r32, ref64), "cpu")
    assert torch.equal(torch.isfinite(back), torch.isfinite(ref64))


def test_kept_whole_where_the_difference_cannot_stand_for_it():
    r32, ref64 = _pair(256, seed=2)
    r32[9] = math.inf  # fp32 overflowed where float64 did not: r32 + d would not be finite there
    assert ref64_delta(r32, ref64) is None
    r32, ref64 = _pair(256, seed=3)
    ref64[4], r32[4] = 1e300, 0.0  # a difference beyond float32's range
    assert ref64_delta(r32, ref64) is None
    assert ref64_delta(r32.double(), ref64) is None and ref64_delta(r32[:10], ref64) is None


def test_the_precision_rule_judges_a_candidate_the_same_against_either():
    g = torch.Generator().manual_seed(4)
    ref64 = torch.randn(1 << 14, dtype=torch.float64, generator=g)
    r32 = ref64.float()
    back = ref64_from_delta(r32, ref64_delta(r32, ref64), "cpu")
    e_t = rel_error(r32, ref64)
    assert math.isclose(rel_error(r32, back), e_t, rel_tol=1e-6)
    passed = []
    for scale in (0.0, 1e-6, 5e-5):  # within every tolerance, the last beyond the precision rule's bound
        noise = (torch.rand(ref64.shape, dtype=torch.float64, generator=g) * 2 - 1) * scale
        cand = (ref64 + noise).float()
        verdicts = [compare_tensor(r32, cand, yardstick=Yardstick(y, e_t, 200 * e_t)) for y in (ref64, back)]
        assert verdicts[0].passed == verdicts[1].passed
        assert math.isclose(verdicts[0].precision_error, verdicts[1].precision_error, rel_tol=1e-6)
        passed.append(verdicts[0].passed)
    assert passed == [True, True, False]  # the rule had something to judge both ways
