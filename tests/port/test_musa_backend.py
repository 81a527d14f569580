"""The musa backend's pieces that run without MUSA: refusal, devices, timing on torch.musa, legality, prompts, bench."""

import contextlib
import types
from pathlib import Path

import pytest

from musacoder.judge import devices, timing
from musacoder.legality.static import check_static
from musacoder.port.kernelbench import port_source

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "benchmarks" / "candidates" / "cuda" / "level1" / "19_ReLU.py"


def test_musa_refused_without_torch_musa(monkeypatch):
    monkeypatch.delenv(devices.SHIM_ENV, raising=False)
    monkeypatch.setitem(__import__("sys").modules, "torch_musa", None)  # import torch_musa → ImportError
    with pytest.raises(devices.BackendUnavailable, match="backend musa needs torch_musa"):
        devices.require_backend("musa")
    devices.require_backend("cuda")  # other backends have no precondition here


def test_shim_env_is_validated(monkeypatch):
    monkeypatch.setenv(devices.SHIM_ENV, "rocm")
    with pytest.raises(devices.BackendUnavailable):
        devices.shim_target()
    monkeypatch.setenv(devices.SHIM_ENV, "cuda")
    assert devices.default_device("musa") == "cuda"
    monkeypatch.delenv(devices.SHIM_ENV)
    assert devices.default_device("musa") == "musa" and devices.default_device("cuda") == "cuda"


def test_musa_has_no_compile_baseline():
    with pytest.raises(ValueError, match="no torch.compile"):
        devices.check_musa_config("musa", "compile", False)
    with pytest.raises(ValueError):
        devices.check_musa_config("musa", "eager", True)
    devices.check_musa_config("musa", "eager", False)
    devices.check_musa_config("cuda", "compile", True)


def test_bench_musa_times_eager_only():
    from musacoder.bench.runner import BenchConfig

    cfg = BenchConfig(model="dir:/x", backend="musa").verify_config()
    assert cfg.time_compile_baseline is False
    with pytest.raises(ValueError):
        BenchConfig(model="dir:/x", backend="musa", verify={"time_compile_baseline": True}).verify_config()
    assert BenchConfig(model="dir:/x", backend="cuda").verify_config().time_compile_baseline is True


def test_runtime_for_musa_uses_torch_musa(monkeypatch):
    import torch

    fake = types.SimpleNamespace(max_memory_reserved=lambda d: 7, synchronize=lambda d=None: None)
    monkeypatch.setattr(torch, "musa", fake, raising=False)
    rt = devices.runtime_for("musa:1")
    assert rt.family == "musa" and rt.max_memory_reserved("musa:1") == 7
    assert str(rt.profiler_activity).endswith("PrivateUse1")
    assert devices.runtime_for("cuda:0").module is torch.cuda and devices.runtime_for("cpu") is None


class _FakeEvent:
    log: list = []

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        _FakeEvent.log.append("record")
        self.t = len(_FakeEvent.log)

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return float(other.t - self.t)


def test_timer_on_a_musa_device_uses_torch_musa_events():
    calls = []
    musa = types.SimpleNamespace(Event=_FakeEvent, _sleep=lambda c: calls.append(("sleep", c)),
                                 synchronize=lambda: calls.append("sync"))
    fake_torch = types.SimpleNamespace(musa=musa, no_grad=contextlib.nullcontext,
                                       empty=lambda n, dtype=None, device=None: types.SimpleNamespace(zero_=lambda: None),
                                       uint8=None)
    timer = timing.Timer(fake_torch, "musa:0", l2_flush_bytes=16)
    region, out = timer.timed(lambda x: x + 1, (1,))
    assert out == 2 and timer.family == "musa"
    assert ("sleep", timing.PREROLL_CYCLES) in calls and calls.count("sync") == 2
    assert region.device_ms == 2.0 and region.stream_ms == 1.0


def test_ported_candidate_is_legal_for_musa_and_musa_names_are_checked():
    ported, _ = port_source(RELU.read_text(), "relu")
    assert check_static(ported, "musa").violations == []
    assert any("musa_sources" in v for v in check_static(RELU.read_text(), "musa").violations)
    bad = ported.replace("const int threads = 256;", "const int threads = 256; float* q; musaMalloc(&q, 4);")
    assert any("allocates device memory" in v for v in check_static(bad, "musa").violations)
    bad = ported.replace("const int threads = 256;", "const int threads = 256; musaStream_t s; musaStreamCreate(&s);")
    assert any("side streams" in v for v in check_static(bad, "musa").violations)


def test_musa_prompt_asks_for_torch_musa_builder():
    from musacoder.prompts import first_turn_messages

    msgs = first_turn_messages("class Model: pass", "musa", few_shot=True)
    user = msgs[1]["content"]
    assert "musa_sources" in user and "torch_musa.utils.musa_extension" in user and "Moore Threads" in msgs[0]["content"]
    assert "cuda_sources" not in user


def test_runtime_legality_counts_musa_kernels():
    from musacoder.legality.runtime import analyse_events

    ev = types.SimpleNamespace(name="ew_kernel", device_type="DeviceType.PrivateUse1", is_user_annotation=False,
                               time_range=types.SimpleNamespace(elapsed_us=lambda: 250.0), cpu_parent=None)
    rep = analyse_events([ev])
    assert rep.device_kernels == ["ew_kernel"] and rep.device_time_ms == 0.25


def test_a_ported_candidate_shows_the_musa_backend():
    from musacoder.candidates import infer_backend

    ported, _ = port_source(RELU.read_text(), "relu")
    assert infer_backend(ported) == "musa" and infer_backend(RELU.read_text()) == "cuda"


def test_verify_backend_musa_refuses_without_torch_musa(tmp_path):
    """No torch_musa here: `musacoder verify --backend musa` says why and exits 2, without a traceback."""
    import subprocess
    import sys

    task = tmp_path / "19_ReLU.py"
    task.write_text("import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n"
                    "        return torch.relu(x)\ndef get_inputs():\n    return [torch.randn(8)]\n"
                    "def get_init_inputs():\n    return []\n")
    cand = tmp_path / "cand.py"
    cand.write_text(port_source(RELU.read_text(), "relu")[0])
    code = ("import sys; sys.modules['torch_musa'] = None\n"  # as on a machine without torch_musa
            "from musacoder.cli import app; app()")
    p = subprocess.run([sys.executable, "-c", code, "verify", "--task", str(task), "--candidate", str(cand),
                        "--backend", "musa"], capture_output=True, text=True, timeout=300,
                       env={k: v for k, v in __import__("os").environ.items() if k != devices.SHIM_ENV})
    assert p.returncode == 2, p.stdout + p.stderr
    assert "backend musa needs torch_musa" in p.stderr and "Traceback" not in p.stderr


def test_torch_musa_builder_is_recorded_and_counted():
    from musacoder.build.cache import BuildError, BuildRecord, make_counted_load_inline

    rec = BuildRecord()
    ext = types.SimpleNamespace(relu_forward=lambda x: x + 1)
    load = make_counted_load_inline(lambda name, **k: ext, rec)
    mod = load("m", cpp_sources="", musa_sources="", functions=["relu_forward"])
    assert mod.relu_forward(1) == 2 and rec.calls == {"relu_forward": 1} and rec.builds[0]["ok"]

    def broken(name, **k):
        raise RuntimeError("Error building extension 'm': mcc failed")

    rec2 = BuildRecord()
    with pytest.raises(BuildError):
        make_counted_load_inline(broken, rec2)("m", musa_sources="")
    assert "mcc failed" in rec2.error_log


@pytest.mark.slow
def test_a_ported_candidate_with_parameters_runs_the_musa_worker_on_the_cpu_shim(tmp_path):
    """The `musa` backend's worker path end to end on the CPU shim (`MUSACODER_MUSA_SHIM=cpu`): a ported candidate
    whose task has parameters (nn.Linear) is loaded through torch_musa's builder, gets the reference's weights, and
    passes every trial. The static rules are switched off because a CPU kernel is not a MUSA kernel; the shim's
    TorchFunctionMode once crashed this worker when the weights were sent in (the protocol's own Tensor.numpy met
    the worker's NumPy seal through the mode)."""
    import json
    import os
    import subprocess
    import sys

    ported, report = port_source((ROOT / "examples" / "candidates" / "linear_gelu_cpu.py").read_text())
    assert report.complete and "torch_musa.utils.musa_extension" in ported
    cand = tmp_path / "linear_gelu_musa.py"
    cand.write_text(ported)
    code = f"""
import json
import musacoder.judge.pipeline as pipeline
import musacoder.legality.static as static_rules
from musacoder.legality.static import check_static

def no_static_violations(*a, **k):
    got = check_static(*a, **k)
    got.violations = []
    return got

static_rules.check_static = no_static_violations
v = pipeline.verify({str(ROOT / 'examples' / 'tasks' / 'linear_gelu.py')!r}, __import__('pathlib').Path({str(cand)!r}),
                    backend="musa")
print(json.dumps({{"status": v.status, "trials": [t.passed for t in v.trials], "error": v.error, "backend": v.backend}}))
"""
    env = {**os.environ, devices.SHIM_ENV: "cpu"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["backend"] == "musa" and got["status"] == "ok" and got["trials"] and all(got["trials"]), got
