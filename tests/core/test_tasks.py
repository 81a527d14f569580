import os

import torch
from pathlib import Path

import pytest

from musacoder.judge.inputs import make_inputs
from musacoder.tasks import (TaskError, apply_overrides, load_kernelbench_dir, load_module, load_task, parse_override,
                             size_constants, task_from_source)

REPO = Path(__file__).resolve().parents[2]
KB = Path(os.environ.get("KERNELBENCH_DIR", REPO.parent / "shared" / "kernelbench"))
needs_kb = pytest.mark.skipif(not KB.exists(), reason="KernelBench folder not found (set KERNELBENCH_DIR)")


@needs_kb
def test_kernelbench_dir_levels():
    tasks = load_kernelbench_dir(KB)
    levels = {t.level for t in tasks}
    assert levels == {1, 2, 3}
    l1 = [t for t in tasks if t.level == 1]
    assert len(l1) == 100 and l1[0].problem_id == 1
    relu = next(t for t in l1 if t.name == "19_ReLU")
    assert size_constants(relu.source)["dim"] == 393216
    assert [t.name for t in load_kernelbench_dir(KB, [1], ["19_*"])] == ["19_ReLU"]


@needs_kb
def test_override_makes_small_inputs():
    t = load_task(KB / "level1" / "19_ReLU.py", {"batch_size": 2, "dim": 8})
    (x,) = make_inputs(load_module(t), seed=1)
    assert tuple(x.shape) == (2, 8)


def test_unknown_override_is_an_error():
    src = (REPO / "examples" / "tasks" / "relu.py").read_text()
    with pytest.raises(TaskError, match="unknown size constant.*nope.*batch_size"):
        task_from_source(src, "relu", overrides={"nope": 1})


def test_override_parsing_and_derived_constants():
    assert parse_override("dim=16") == ("dim", 16)
    assert parse_override("shape=(2, 3)") == ("shape", (2, 3))
    assert parse_override("mode=fast") == ("mode", "fast")
    with pytest.raises(TaskError):
        parse_override("dim")
    src = "a = 4\nb = a * 2\n"
    ns = {}
    exec(apply_overrides(src, {"a": 1}), ns)
    assert ns["b"] == 2


def test_constants_written_as_arithmetic_can_be_overridden():
    """KernelBench writes many sizes as expressions (`M = 16384 * 4`, 52 of its 250 files): they are size constants
    too, with their values, and `--set` replaces them; calls and lists are not constants."""
    src = "M = 16384 * 4\nN = M // 2 + 1\nneg = -3\nshape = (M, 2)\nbig = 2 ** 100\nL = [1, 2]\nf = g(3)\nM2 = M\n"
    assert size_constants(src) == {"M": 65536, "N": 32769, "neg": -3, "shape": (65536, 2), "M2": 65536}
    ns = {}
    exec(apply_overrides(src.replace("big = 2 ** 100\n", "").replace("f = g(3)\n", ""), {"M": 8}), ns)
    assert (ns["M"], ns["N"], ns["shape"], ns["M2"]) == (8, 5, (8, 2), 8)
    assert "x" not in size_constants("x = 1\nx = y\n")  # reassigned to a non-constant


@needs_kb
def test_kernelbench_expression_sizes_are_overridable():
    t = load_task(KB / "level1" / "5_Matrix_scalar_multiplication.py", {"M": 4, "N": 8})
    a, s = make_inputs(load_module(t), seed=1)
    assert tuple(a.shape) == (4, 8)


def test_bad_task_file(tmp_path):
    p = tmp_path / "1_x.py"
    p.write_text("x = 1\n")
    with pytest.raises(TaskError, match="missing Model, get_inputs, get_init_inputs"):
        load_task(p)
    with pytest.raises(TaskError, match="not found"):
        load_task(tmp_path / "nope.py")


def test_seeded_inputs_are_reproducible_and_perturbed():
    t = load_task(REPO / "examples" / "tasks" / "scale_bias_sum.py")
    m = load_module(t)
    a, = make_inputs(m, 7)
    b, = make_inputs(m, 7)
    c, = make_inputs(m, 7, perturb=True)
    assert (a == b).all()
    assert not (a == c).all() and ((a >= 0) == (c >= 0)).all()


def test_timed_rounds_get_zero_mean_inputs_where_the_task_allows():
    """Timing runs on the inputs the strict checks have power on (`VerifyConfig.timing_inputs`): zero-mean once a
    "center" trial showed the reference finite there; the task's own otherwise, or when asked for."""
    from musacoder import VerifyConfig
    from musacoder.judge.inputs import seed_for
    from musacoder.judge.stages.timing import timing_perturb
    from musacoder.judge.worker import _RotatingInputs

    t = load_task(REPO / "examples" / "tasks" / "relu.py")
    cfg = VerifyConfig()
    assert timing_perturb(cfg, None) is None  # no "center" trial has run
    assert timing_perturb(cfg, True) == "center"
    assert timing_perturb(cfg, False) is None  # the reference was not finite on zero-mean inputs
    for cfg in (VerifyConfig(timing_inputs="task"), VerifyConfig(perturb_inputs=False)):
        assert timing_perturb(cfg, True) is None

    class Worker:  # what `_RotatingInputs` reads of the worker
        task_module, device = load_module(t), "cpu"

    Worker.torch = torch
    rounds = _RotatingInputs(Worker, 5, 2, "center")
    for r in range(4):  # refilled in place from round 2 on: the same values as a fresh draw
        x, = rounds(r)
        want, = make_inputs(Worker.task_module, seed_for(5, r), perturb="center")
        assert torch.equal(x, want) and abs(float(x.mean())) < 1e-4


def test_hf_loader_with_local_fixture(tmp_path):
    pytest.importorskip("datasets", reason="datasets is not installed: pip install -e '.[data]' (or .[dev])")
    import json

    from musacoder.tasks import load_hf_kernelbench

    src = (REPO / "examples" / "tasks" / "relu.py").read_text()
    f = tmp_path / "level_1.jsonl"
    f.write_text(json.dumps({"code": src, "level": 1, "name": "19_ReLU.py", "problem_id": 19}) + "\n")
    tasks = load_hf_kernelbench(dataset="json", data_files={"level_1": str(f)})
    assert [(t.name, t.level, t.problem_id) for t in tasks] == [("19_ReLU", 1, 19)]


def test_seeded_inputs_are_thread_safe():
    from concurrent.futures import ThreadPoolExecutor

    m = load_module(load_task(REPO / "examples" / "tasks" / "relu.py", {"batch_size": 64, "dim": 512}))
    expected = {s: make_inputs(m, s)[0] for s in range(16)}
    with ThreadPoolExecutor(8) as pool:
        got = dict(zip(range(16), pool.map(lambda s: make_inputs(m, s)[0], range(16))))
    assert all(torch.equal(expected[s], got[s]) for s in range(16))
