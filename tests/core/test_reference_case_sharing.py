"""A trial's reference case through the per-task cache: the candidate that computes it compares against its own
originals, later candidates against copies of the kept ones, and a case larger than the cache's budget (known from
the task's footprint on a GPU) is computed in place, never sent to the host and back."""

from pathlib import Path

import torch

from musacoder.config import VerifyConfig
from musacoder.judge.slots import Footprint
from musacoder.judge.stages.context import RunContext
from musacoder.judge.stages.correctness import precision_models, shared_reference_case
from musacoder.judge.task_cache import TaskCache
from musacoder.tasks import load_module, load_task

ROOT = Path(__file__).resolve().parents[2]


def _ctx(cache: TaskCache) -> RunContext:
    task = load_task(ROOT / "examples" / "tasks" / "linear_gelu.py")
    ctx = RunContext.new(task, "", "cpu", VerifyConfig(), cache=cache)
    ctx.device = ctx.device_pool = "cpu"
    ctx.share_with_task()
    ctx.module = load_module(task)
    return ctx


def _case(ctx: RunContext):
    module = ctx.module
    torch.manual_seed(0)
    ref = module.Model(*module.get_init_inputs())
    ctx.precision_models = precision_models(ctx, ref)
    return shared_reference_case(ctx, module, ref, seed=7, perturb="center", label=0)


def _leaves(case):
    _, out, precision = case
    return [out] + [y.ref64 for y in precision.leaves.values()]


def test_the_computing_candidate_keeps_its_originals_and_the_next_gets_copies():
    cache = TaskCache(budget_bytes=1 << 30)
    first_ctx, second_ctx = _ctx(cache), _ctx(cache)
    first, second = _case(first_ctx), _case(second_ctx)
    assert len(cache) == 1 and first_ctx.verdict.reference_reused is False and second_ctx.verdict.reference_reused
    kept = next(iter(cache._entries.values()))[0]
    kept_leaves = [kept[1]] + [y.ref64 for y in kept[2].leaves.values()]
    for a, b, k in zip(_leaves(first), _leaves(second), kept_leaves):
        assert a.data_ptr() != k.data_ptr() != b.data_ptr() != a.data_ptr()  # nobody reads another's tensor
    (out1, *ref1), (out2, *ref2) = _leaves(first), _leaves(second)
    assert torch.equal(out1, out2) and torch.equal(out1, kept[1])
    for r1, r2, k in zip(ref1, ref2, kept_leaves[1:]):
        # kept as the float32 difference from the output, whole again for the next candidate within its bound
        assert k.dtype == torch.float32 and r2.dtype == torch.float64 and k.nbytes * 2 == r1.nbytes
        assert bool(((r2 - r1).abs() <= (r1 - out1.double()).abs() * 2.0 ** -23 + r1.abs() * 2.0 ** -51
                     + 2.0 ** -148).all())
    y1, y2 = (next(iter(c[2].leaves.values())) for c in (first, second))
    assert (y1.torch_error, y1.low_error, y1.slack) == (y2.torch_error, y2.low_error, y2.slack)


def test_a_case_beyond_the_budget_is_not_kept_nor_copied():
    cache = TaskCache(budget_bytes=1 << 20)
    ctx = _ctx(cache)
    ctx.fp = Footprint(inputs=1 << 30, outputs=1 << 30, weights=0)  # a task whose outputs alone exceed the budget
    case = _case(ctx)
    assert len(cache) == 0 and cache.misses == 0  # the cache was not even asked
    small = _ctx(cache)
    small.fp = Footprint(inputs=1 << 10, outputs=1 << 10, weights=0)
    assert torch.equal(_case(small)[1], case[1]) and cache.misses == 1


def test_the_task_s_candidates_share_one_initialisation_of_the_reference_model():
    """With a task cache the reference's weights are made once per task (a deep copy of a pristine host model for
    each later candidate, not a fresh initialisation); each candidate's model is its own, and what one candidate's
    forwards change (batch-norm statistics) reaches neither the others' models nor the weights sent to workers."""
    from musacoder.judge.inputs import seed_for
    from musacoder.judge.stages.correctness import reference_model

    task = load_task(ROOT / "examples" / "tasks" / "linear_gelu.py")
    source = task.source + (
        "\nINITS = []\n_init = Model.__init__\n\n\ndef _counted(self, *a):\n    INITS.append(1)\n    _init(self, *a)\n"
        "    self.bn = torch.nn.BatchNorm1d(self.linear.out_features)\n\n\nModel.__init__ = _counted\n")
    task = task.model_copy(update={"source": source})
    cache = TaskCache()
    first, second = _ctx(cache), _ctx(cache)
    module = load_module(task)
    seed = seed_for(first.master_seed, 0, 0)
    assert seed == seed_for(second.master_seed, 0, 0)  # one task, one secret
    _, build1, state1 = reference_model(first, module, seed, shared=True)
    m1 = build1()
    before = {k: t.clone() for k, t in state1.items()}
    m1.bn(torch.randn(16, m1.linear.out_features) * 5 + 3)  # train mode: the running statistics move
    _, build2, state2 = reference_model(second, module, seed, shared=True)
    m2 = build2()
    assert len(module.INITS) == 1 and not first.verdict.reference_reused and second.verdict.reference_reused
    assert m2 is not m1 and m2.linear.weight.data_ptr() != m1.linear.weight.data_ptr()
    assert all(torch.equal(m2.state_dict()[k], before[k]) for k in before)
    assert all(torch.equal(state2[k], before[k]) for k in before)
    _, _, own = reference_model(second, module, seed, shared=False)  # extra shapes: made afresh, same weights
    assert len(module.INITS) == 2 and all(torch.equal(own[k], before[k]) for k in before)


def test_keeping_a_case_pays_only_where_computing_it_takes_longer_than_copying_it_back():
    from musacoder.judge.stages.correctness import HOST_LINK_BYTES_S, worth_keeping

    gb = 2**30
    assert worth_keeping(0.001, 100 * gb, over_host_link=False)  # compared on the host: nothing comes back
    # a 6.4 GB elementwise output and its float64 difference (13 GB, ~1.6 s back) computed in a fraction of a second
    assert not worth_keeping(0.3, 13 * gb, over_host_link=True)
    # a convolution's float64 reference: seconds for a 4 GB case
    assert worth_keeping(4.0, 4 * gb, over_host_link=True)
    assert worth_keeping(1.01, HOST_LINK_BYTES_S, True) and not worth_keeping(0.99, HOST_LINK_BYTES_S, True)


def test_a_case_not_worth_keeping_is_computed_by_each_candidate_and_never_copied(monkeypatch):
    """The cache holds only the decision (`RECOMPUTE`, no bytes); each later candidate computes its own case from the
    same seed, the same values, without waiting on a copy of the first one's."""
    from musacoder.judge.stages import correctness

    asked = []

    def never(compute_s, case_bytes, over_host_link):
        asked.append((compute_s, case_bytes))
        return False

    monkeypatch.setattr(correctness, "worth_keeping", never)
    copies = []  # what would go to the host to be kept
    monkeypatch.setattr(correctness, "_kept_yardsticks", lambda *args: copies.append(args))
    cache = TaskCache(budget_bytes=1 << 30)
    a, b, c = _ctx(cache), _ctx(cache), _ctx(cache)
    first, second, third = _case(a), _case(b), _case(c)
    assert len(asked) == 1 and asked[0][0] > 0 and asked[0][1] == 2 * first[1].nbytes  # output + float32 difference
    assert not copies and cache.bytes_kept == 0 and len(cache) == 1
    assert next(iter(cache._entries.values()))[0] is correctness.RECOMPUTE
    for got in (second, third):
        assert got[1].data_ptr() != first[1].data_ptr() and torch.equal(got[1], first[1])
        for y1, y2 in zip(first[2].leaves.values(), got[2].leaves.values()):
            assert torch.equal(y1.ref64, y2.ref64) and y1.torch_error == y2.torch_error
