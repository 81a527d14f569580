"""The worker's check of a candidate's outputs against the reference's spec, made before any copy of them
(`musacoder.judge.inputs.output_problem`): junk outputs are the candidate's failure, never the verifier's."""

import collections

import torch

from musacoder.judge.inputs import SHAPE_SLACK, output_problem, output_spec


def test_matching_outputs_pass_in_any_layout():
    ref = (torch.zeros(4, 3), [torch.zeros(2, dtype=torch.int64)])
    spec = output_spec(ref)
    assert output_problem((torch.ones(3, 4).t(), [torch.arange(2)]), spec) is None
    assert output_problem([torch.ones(4, 3), (torch.arange(2),)], spec) is None  # list and tuple are interchangeable
    assert output_problem(torch.ones(1, 1).expand(4, 3), output_spec(torch.zeros(4, 3))) is None


def test_a_view_claiming_more_elements_than_the_reference_is_refused_without_a_copy():
    huge = torch.zeros(1).expand(2 ** 40)  # four terabytes if copied
    spec = output_spec(torch.zeros(64, 64))
    assert "shape [1099511627776], expected [64, 64]" in output_problem(huge, spec)
    assert "expected one like [64, 64]" in output_problem(huge.view(2 ** 20, 2 ** 20), spec, exact=False)
    # timing rounds: another shape of the same rank is allowed up to the slack (outputs sized by their values), but
    # not so many more elements that the harness's kept copy would outgrow one output's memory
    assert output_problem(torch.zeros(64, 63), spec, exact=False) is None
    big = output_spec(torch.zeros(4096, 4096))
    assert output_problem(torch.zeros(1).expand(4096, 4096 + 4096 // SHAPE_SLACK), big, exact=False) is None
    assert "expected one like [4096, 4096]" in output_problem(torch.zeros(1).expand(4096, 8192), big, exact=False)
    assert output_problem(torch.zeros(64, 65), spec) == "output: shape [64, 65], expected [64, 64]"


def test_structure_dtype_and_kind_mismatches_name_the_leaf():
    spec = output_spec((torch.zeros(2), torch.zeros(3)))
    assert "expected a sequence of 2 outputs, got a tuple of 1" in output_problem((torch.zeros(2),), spec)
    assert output_problem((torch.zeros(2), torch.zeros(3, dtype=torch.float16)), spec) == \
        "output[1]: dtype float16, expected float32"
    assert "expected a tensor, got a int" in output_problem((torch.zeros(2), 3), spec)
    assert "expected a sequence" in output_problem([torch.zeros(2)] * 200_000, spec)
    assert "expected a float, got a tensor" in output_problem(torch.zeros(1), output_spec(1.5))


def test_only_plain_dense_tensors_and_builtin_sequences_are_outputs():
    Pair = collections.namedtuple("Pair", "a b")
    spec = output_spec((torch.zeros(2), torch.zeros(2)))
    assert "forward returned type Pair" in output_problem(Pair(torch.zeros(2), torch.zeros(2)), spec)
    assert "forward returned type Pair" in output_problem(Pair(torch.zeros(2), torch.zeros(2)))  # with no spec too

    class Sub(torch.Tensor):
        pass

    assert "tensor subclass" in output_problem(torch.zeros(2).as_subclass(Sub))
    assert "meta tensor" in output_problem(torch.zeros(2, device="meta"))
    assert "sparse_coo" in output_problem(torch.eye(2).to_sparse(), output_spec(torch.eye(2)))
