"""The style corpus: kernel answers written the ways kernel-writing models write them (module-level and lazy builds,
cached builders, import and device guards, shape arithmetic, cpp_extension.load of written sources, fused
epilogues, autotune configs …), each labelled legitimate or not in labels.json with a one-line reason.

Extraction and the static rules run on every candidate: every legitimate one must pass them, and every illegitimate
one is either rejected here (labelled `"static": "reject"`) or left to the runtime stages (`"static": "pass"`: judged
by `benchmarks/style_corpus.py` with the whole pipeline)."""

import json
import os
from pathlib import Path

import pytest

from musacoder.candidates import extract_code
from musacoder.legality.static import check_static

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LABELS = json.loads((HERE / "labels.json").read_text())
FILES = sorted(p.name for p in HERE.glob("*.py") if not p.name.startswith("test_"))
KERNELBENCH = Path(os.environ.get("KERNELBENCH_DIR", "/work/shared/kernelbench"))


def test_every_candidate_is_labelled_once():
    assert sorted(LABELS) == FILES
    assert len(FILES) >= 60
    for name, lab in LABELS.items():
        assert lab["label"] in ("legitimate", "illegitimate"), name
        assert lab["backend"] in ("cpu", "cuda", "triton"), name
        assert lab["static"] in ("pass", "reject"), name
        assert lab["reason"].strip() and "\n" not in lab["reason"], name
        assert lab["label"] == "illegitimate" or lab["static"] == "pass", f"{name}: a legitimate one must pass"
        assert set(lab) <= {"task", "backend", "label", "reason", "static", "set", "gpu_only", "gpu_label",
                            "gpu_reason"}, name
        assert ("gpu_label" in lab) == ("gpu_reason" in lab), f"{name}: a label for the GPU says why"
        assert lab.get("gpu_label", "illegitimate") in ("legitimate", "illegitimate"), name


def test_tasks_exist():
    for name, lab in LABELS.items():
        task = lab["task"]
        if task.startswith("examples/"):
            assert (REPO / task).is_file(), name
        elif KERNELBENCH.is_dir():
            assert (KERNELBENCH / task).is_file(), name


def _static(name: str):
    lab = LABELS[name]
    cand = extract_code((HERE / name).read_text())
    assert cand.code is not None, f"{name}: {cand.extract_error}"
    assert cand.backend == lab["backend"], f"{name}: the code shows {cand.backend}, labelled {lab['backend']}"
    return check_static(cand.code, lab["backend"]).violations


@pytest.mark.parametrize("name", [n for n in FILES if LABELS[n]["label"] == "legitimate"])
def test_legitimate_passes_the_static_stages(name):
    assert _static(name) == [], f"false reject of {name} ({LABELS[name]['reason']})"


@pytest.mark.parametrize("name", [n for n in FILES if LABELS[n]["label"] == "illegitimate"])
def test_illegitimate_is_rejected_statically_or_left_to_runtime(name):
    violations = _static(name)
    if LABELS[name]["static"] == "reject":
        assert violations, f"{name} now passes the static stages ({LABELS[name]['reason']})"
    else:
        assert not violations, f"{name} is now rejected statically: relabel it \"reject\" ({violations[:2]})"


def test_report_what_the_runtime_stages_must_judge(capsys):
    runtime = [n for n in FILES if LABELS[n]["label"] == "illegitimate" and LABELS[n]["static"] == "pass"]
    static = [n for n in FILES if LABELS[n]["label"] == "illegitimate" and LABELS[n]["static"] == "reject"]
    with capsys.disabled():
        print(f"\nstyle corpus: {len(static)} illegitimate rejected by the static stages; {len(runtime)} left to the "
              "runtime stages (judged on the GPU by benchmarks/style_corpus.py):")
        for n in runtime:
            print(f"  {n}: {LABELS[n]['reason']}")
    assert static and runtime
