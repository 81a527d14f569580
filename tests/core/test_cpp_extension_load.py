"""`torch.utils.cpp_extension.load` in a candidate worker: the sources the candidate wrote in its own working folder
are built through the build cache like `load_inline`'s (so the binary rule reads the library); a source anywhere else
is refused with an error that says what to write instead. Exercised on the worker directly (the static rules are
another layer)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from musacoder.judge.inputs import make_inputs
from musacoder.judge.messages import InitRequest, LoadRequest, TrialRequest
from musacoder.judge.sandbox import Sandbox
from musacoder.tasks import load_module, load_task

REPO = Path(__file__).resolve().parents[2]
RELU = load_task(REPO / "examples" / "tasks" / "relu.py")

LOAD_FROM_FILE = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""
#include <torch/extension.h>

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.f ? in[i] : 0.f;
    return out;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu_fwd", &relu_fwd, "relu"); }
"""

with open("relu_from_file.cpp", "w") as f:
    f.write(SOURCE)
ext = load(name="relu_from_file", sources=["relu_from_file.cpp"], extra_cflags=["-O2"], verbose=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_fwd(x)
'''


def _load(sb: Sandbox, code: str, cache: Path) -> dict:
    return sb.request(LoadRequest(code=code, backend="cpu", device="cpu", cache_dir=str(cache),
                                  task_source=RELU.source), 600)


@pytest.mark.slow
def test_a_cpp_source_written_to_the_workers_folder_builds_through_the_cache_and_runs(tmp_path):
    cache = tmp_path / "cache"
    with Sandbox(cache) as sb:
        loaded = _load(sb, LOAD_FROM_FILE, cache)
        assert loaded.get("ok"), loaded
        assert [b["ok"] for b in loaded["builds"]] == [True] and len(loaded["builds"][0]["key"]) == 64
        assert loaded["global_state"] == []
        assert sb.request(InitRequest(init_inputs=[], state_dict={}, seed=0, device="cpu"), 60).get("ok")
        trial = sb.request(TrialRequest(seed=5, perturb=None), 120)
    assert trial.get("ok"), trial
    assert trial["report"]["launches"] == 1  # the library's function was counted like load_inline's
    (x,) = make_inputs(load_module(RELU, "relu_task"), 5, device="cpu")
    assert torch.equal(trial["outputs"], torch.relu(x))


@pytest.mark.parametrize("setup,source", [
    ("", "/etc/hostname"),  # outside the folder
    ("import os\nos.symlink('/etc/hostname', 'k.cpp')\n", "k.cpp"),  # inside by name, a link to outside
    ("", "../k.cpp"),
])
def test_a_source_outside_the_workers_folder_is_refused(tmp_path, setup, source):
    code = (f"import torch.nn as nn\nfrom torch.utils.cpp_extension import load\n{setup}"
            f"ext = load(name='k', sources=[{source!r}])\n\n\nclass ModelNew(nn.Module):\n    pass\n")
    with Sandbox(tmp_path / "cache") as sb:
        got = _load(sb, code, tmp_path / "cache")
    assert got.get("kind") == "runtime_error" and got.get("where") == "import", got
    assert "outside the candidate's working folder" in got["error"] and "load_inline" in got["error"], got["error"]
