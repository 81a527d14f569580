import torch

from musacoder.judge.compare import compare_outputs
from musacoder.judge.worker import input_mutation


def test_exact_and_tolerance():
    r = torch.randn(100)
    assert compare_outputs(r, r.clone()).passed
    assert compare_outputs(r, r + 5e-5).passed
    c = compare_outputs(r, r + 1e-2)
    assert not c.passed and "outside atol" in c.message


def test_zeros_fail_tiny_outputs_through_relative_error():
    r = torch.full((1000,), 1e-6)
    c = compare_outputs(r, torch.zeros_like(r))
    assert not c.passed and "relative L2" in c.message


def test_structure_shape_dtype_type():
    r = torch.randn(4)
    assert "shape" in compare_outputs(r, torch.randn(2, 2)).message
    assert "dtype" in compare_outputs(r, r.double()).message
    assert "structure" in compare_outputs((r, r), (r,)).message
    assert "plain torch.Tensor" in compare_outputs(r, torch.nn.Parameter(r.clone())).message


def test_nan_inf():
    r = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_outputs(r, r.clone()).passed
    assert "NaN" in compare_outputs(r, torch.tensor([1.0, 0.0, float("inf")])).message
    assert "Inf" in compare_outputs(r, torch.tensor([1.0, float("nan"), -float("inf")])).message


def test_half_precision_tolerance():
    r = torch.randn(64).half()
    assert compare_outputs(r, r + 5e-3).passed


def test_input_mutation_check():
    x = torch.tensor([1.0, float("nan"), 3.0])
    assert input_mutation([x], [x.clone()]) is None
    assert "modified in place" in input_mutation([x], [x + 1])
    assert "shape or dtype" in input_mutation([x], [x.double()])


def test_task_audit_flags_degenerate_references():
    from musacoder.judge.compare import task_audit

    assert task_audit(torch.randn(8)) == []
    assert "exactly zero" in task_audit(torch.zeros(8))[0]
    assert "below atol" in task_audit((torch.full((8,), 1e-6),))[0]


def test_round_mantissa_in_place_matches_the_copying_version():
    from musacoder.judge.compare import round_mantissa, round_mantissa_

    x = torch.randn(4097) * torch.logspace(-20, 20, 4097)
    x[:3] = torch.tensor([65504.0, 1.0 + 2**-11, -3.0e-38])
    want = round_mantissa(x)
    y = x.clone()
    assert round_mantissa_(y) is y and torch.equal(y, want) and not torch.equal(y, x)
