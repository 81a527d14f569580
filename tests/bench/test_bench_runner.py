import base64
import json
import sys

import pytest
from bench_helpers import FIXTURES, SCRIPT, FakeVerifier, ScriptedClient, write_responses

from musacoder.bench.report import write_reports
from musacoder.bench.rundir import RunDir
from musacoder.bench.runner import BenchConfig, ResumeError, run_bench
from musacoder.bench.suites import SuiteError, resolve_suite

SUITE = f"dir:{FIXTURES / 'tasks'}"
ROOT = FIXTURES.parents[2]


def _config(**kw):
    # the fake verifier reports compile speedups, so declare the compile baseline timed
    base = dict(model="dir:unused", suite=SUITE, backend="cpu", samples=3, turns=3,
                verify={"time_compile_baseline": True})
    return BenchConfig(**{**base, **kw})


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_multi_turn_loop_stops_on_pass_and_feeds_back(tmp_path):
    client, verifier = ScriptedClient(SCRIPT), FakeVerifier()
    summary = run_bench(_config(), tmp_path / "run", client=client, verifier=verifier, progress=False)
    rd = RunDir(tmp_path / "run")
    verdicts = rd.read_verdicts()
    assert sorted(verdicts) == sorted([
        ("1_relu_tiny", 0, 1), ("1_relu_tiny", 1, 1), ("1_relu_tiny", 1, 2),
        ("1_relu_tiny", 2, 1), ("1_relu_tiny", 2, 2), ("1_relu_tiny", 2, 3),
        ("2_scale_linear_tiny", 0, 1), ("2_scale_linear_tiny", 2, 1)])
    # responses are stored in the dir: layout, turn 1 as <sample>.txt
    assert rd.read_response("1_relu_tiny", 1, 1).endswith("FAIL")
    assert (tmp_path / "run/responses/1_relu_tiny/1.turn2.txt").read_text() == "PASS 1.2"
    # a turn-2 request carries the stripped turn-1 response and MooreEval's feedback for round 1
    req = next(r for r in client.requests if (r.task, r.sample, r.turn) == ("1_relu_tiny", 1, 2))
    roles = [m["role"] for m in req.messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert req.messages[2]["content"] == "FAIL" and "hidden-thoughts" not in str(req.messages)
    assert req.messages[3]["content"].startswith("=== System Feedback for Round 1 ===")
    assert "FIXME-MARKER" in req.messages[3]["content"]
    req3 = next(r for r in client.requests if (r.task, r.sample, r.turn) == ("1_relu_tiny", 2, 3))
    assert "=== System Feedback for Round 2 ===" in req3.messages[-1]["content"]
    # every job went through the verifier with the backend and the task object
    assert all(j.backend == "cpu" and j.task.name in ("1_relu_tiny", "2_scale_linear_tiny") for j in verifier.jobs)
    gens = _lines(tmp_path / "run/generations.jsonl")
    assert sum(not g["ok"] for g in gens) == 2  # linear s1 turn 1 and linear s0 turn 2 had no response
    # metrics: relu n=3 c=2, linear n=2 c=1, k=3; the group is the suite folder's name
    g = summary["tasks"]
    assert g["pass_at_k"] == pytest.approx(1.0)
    assert g["avg_at_k"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert g["first_turn"]["avg_at_k"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert g["faster_rate_eager"] == pytest.approx((2 / 3 + 0) / 2)
    assert g["faster_rate_compile"] == pytest.approx((1 / 3) / 2)
    assert g["tasks_short_of_k"] == 1 and g["turns_to_success_hist"] == {"1": 2, "2": 1}
    assert summary["overall"]["pass_at_k"] == g["pass_at_k"]
    assert set(summary) == {"run", "tasks", "overall"}


def test_keep_optimizing_continues_after_pass(tmp_path):
    client = ScriptedClient(SCRIPT)
    summary = run_bench(_config(keep_optimizing=True, tasks=["1_*"]), tmp_path / "run", client=client,
                        verifier=FakeVerifier(), progress=False)
    verdicts = RunDir(tmp_path / "run").read_verdicts()
    assert ("1_relu_tiny", 0, 3) in verdicts and ("1_relu_tiny", 1, 3) not in verdicts  # s1 turn 3 has no script
    assert summary["overall"]["geomean_speedup"] == pytest.approx((4.0 * 1.2) ** 0.5)  # best turns: 4.0 and 1.2


def test_resume_after_interruption(tmp_path):
    out = tmp_path / "run"
    first = ScriptedClient(SCRIPT)
    with pytest.raises(KeyboardInterrupt):
        run_bench(_config(), out, client=first, verifier=FakeVerifier(fail_after=3), progress=False)
    done = RunDir(out).read_verdicts()
    assert len(done) == 3
    on_disk = {(p.parent.name, int(p.name.split(".")[0])) for p in (out / "responses").glob("*/*.txt")}
    assert len(on_disk) >= 3
    second_client, second = ScriptedClient(SCRIPT), FakeVerifier()
    summary = run_bench(_config(), out, client=second_client, verifier=second, progress=False)
    lines = _lines(out / "verdicts.jsonl")
    keys = [(r["task"], r["sample"], r["turn"]) for r in lines]
    assert len(keys) == len(set(keys)) == 8  # nothing verified twice
    assert len(second.jobs) == 5
    # turn-1 responses already on disk were verified, not regenerated
    regenerated = {(r.task, r.sample) for r in second_client.requests if r.turn == 1}
    assert not regenerated & on_disk
    assert summary["overall"]["n_samples"] == 5
    # a finished run resumes to a no-op
    third = FakeVerifier()
    run_bench(_config(), out, client=ScriptedClient(SCRIPT), verifier=third, progress=False)
    assert third.jobs == []


def test_resume_refuses_other_settings_but_allows_more_samples(tmp_path):
    out = tmp_path / "run"
    run_bench(_config(samples=1, turns=1), out, client=ScriptedClient(SCRIPT), verifier=FakeVerifier(),
              progress=False)
    with pytest.raises(ResumeError, match="temperature"):
        run_bench(_config(samples=1, temperature=0.2), out, client=ScriptedClient(SCRIPT), verifier=FakeVerifier(),
                  progress=False)
    v = FakeVerifier()
    run_bench(_config(samples=2, turns=1), out, client=ScriptedClient(SCRIPT), verifier=v, progress=False)
    assert sorted((j.task.name, j.id) for j in v.jobs) == [("1_relu_tiny", "1_relu_tiny#s1#t1")]


def test_dir_model_replays_a_run(tmp_path):
    write_responses(tmp_path / "resp", {
        "1_relu_tiny": {"0.txt": "PASS 1.5", "1.txt": "FAIL", "1.turn2.txt": "PASS 1.0"},
        "2_scale_linear_tiny": {"0.txt": "nothing", "1.turn1.txt": "PASS 3.0"}})
    cfg = _config(model=f"dir:{tmp_path / 'resp'}", samples=2, turns=2)
    s1 = run_bench(cfg, tmp_path / "a", verifier=FakeVerifier(), progress=False)
    assert s1["overall"]["avg_at_k"] == pytest.approx(1.0 * 0.5 + 0.5 * 0.5)
    # the run's responses/ folder is itself a dir: model
    s2 = run_bench(cfg.model_copy(update={"model": f"dir:{tmp_path / 'a' / 'responses'}"}), tmp_path / "b",
                   verifier=FakeVerifier(), progress=False)
    assert {k: v for k, v in s2["overall"].items()} == s1["overall"]


def test_suite_resolution_and_overrides(tmp_path, monkeypatch):
    tasks, label = resolve_suite(SUITE, patterns=["2_*"], overrides={"in_features": 4})
    assert [t.name for t in tasks] == ["2_scale_linear_tiny"] and label == "tasks"
    assert tasks[0].overrides == {"in_features": 4}
    tasks, _ = resolve_suite(SUITE, overrides={"batch_size": 2})
    assert all(t.overrides == {"batch_size": 2} for t in tasks)
    with pytest.raises(SuiteError, match="no task in the suite defines"):
        resolve_suite(SUITE, overrides={"batch_szie": 2})
    with pytest.raises(SuiteError, match="no tasks"):
        resolve_suite(SUITE, patterns=["nothing*"])
    if (ROOT / "examples/tasks").is_dir():
        monkeypatch.chdir(tmp_path)  # found next to the source tree, not only in the working directory
        tasks, label = resolve_suite("examples")
        assert label == "examples" and tasks and all(t.level is None for t in tasks)
    monkeypatch.delenv("KERNELBENCH_DIR", raising=False)
    with pytest.raises(SuiteError, match="KERNELBENCH_DIR"):
        resolve_suite("kernelbench:level1")
    kb = tmp_path / "kb" / "level2"
    kb.mkdir(parents=True)
    (kb / "7_Relu.py").write_text((FIXTURES / "tasks/1_relu_tiny.py").read_text())
    monkeypatch.setenv("KERNELBENCH_DIR", str(tmp_path / "kb"))
    tasks, _ = resolve_suite("kernelbench:level2")
    assert [t.key for t in tasks] == ["level2/7_Relu"]


def test_report_html_has_plots_and_compare(tmp_path):
    pytest.importorskip("matplotlib", reason="the report's plots need matplotlib: pip install -e '.[report]'")
    a, b = tmp_path / "a", tmp_path / "b"
    run_bench(_config(), a, client=ScriptedClient(SCRIPT), verifier=FakeVerifier(), progress=False,
              write_report=False)
    worse = {k: ("FAIL" if k[0] == "2_scale_linear_tiny" else v) for k, v in SCRIPT.items()}
    run_bench(_config(turns=1), b, client=ScriptedClient(worse), verifier=FakeVerifier(), progress=False)
    summary = write_reports(a, compare=b)
    page = (a / "report.html").read_text()
    imgs = page.split('<img alt="')[1:]
    assert len(imgs) == 3
    for img in imgs:
        data = img.split('src="data:image/png;base64,')[1].split('"')[0]
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "fast_p curve" in page and "per-level metrics" in page and "speedup distribution" in page
    assert "<h2>Comparison</h2>" in page and "Solved only by A" in page
    md = (a / "report.md").read_text()
    assert "| Pass@k |" in md and "## Comparison" in md and "2_scale_linear_tiny" in md
    on_disk = json.loads((a / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    for group in ("tasks", "overall"):
        block = on_disk[group]
        for key in ("pass_at_k", "avg_at_k", "faster_rate_eager", "faster_rate_compile", "fast_p", "geomean_speedup"):
            assert key in block
        assert set(block["fast_p"]) == {"0.0", "0.5", "0.8", "1.0", "1.2", "1.5", "2.0"}


def test_report_degrades_to_tables_without_matplotlib(tmp_path, monkeypatch):
    run_bench(_config(turns=1), tmp_path, client=ScriptedClient(SCRIPT), verifier=FakeVerifier(), progress=False,
              write_report=False)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # import fails
    write_reports(tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "<img" not in page and "matplotlib is not installed" in page and "<table>" in page


def test_cli_bench_and_report(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import musacoder.bench.runner as runner_mod
    from musacoder.cli import app

    monkeypatch.setattr(runner_mod, "default_verifier", FakeVerifier())
    write_responses(tmp_path / "resp", {"1_relu_tiny": {"0.txt": "PASS 2.0"}, "2_scale_linear_tiny": {"0.txt": "x"}})
    cli = CliRunner()
    res = cli.invoke(app, ["bench", "--model", f"dir:{tmp_path / 'resp'}", "--suite", SUITE, "--backend", "cpu",
                           "--samples", "1", "--turns", "2", "--set", "batch_size=2", "--verify-arg", "trials=2",
                           "--no-progress", "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    cfg = json.loads((tmp_path / "run/config.json").read_text())
    assert cfg["overrides"] == {"batch_size": 2} and cfg["verify"] == {"trials": 2}
    assert json.loads((tmp_path / "run/summary.json").read_text())["overall"]["pass_at_k"] == 0.5
    res = cli.invoke(app, ["report", str(tmp_path / "run"), "--compare", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert "Pass@k" in res.output
    res = cli.invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "not a benchmark run directory" in res.output
    res = cli.invoke(app, ["bench", "--model", "dir:/x", "--suite", "bogus", "--out", str(tmp_path / "r2")])
    assert res.exit_code == 2 and "unknown suite" in res.output


def test_default_backend_follows_the_hardware_and_the_run_dir(tmp_path, monkeypatch):
    """Without --backend: cuda only where a CUDA GPU is visible, cpu elsewhere (a cuda default on a GPU-less machine
    made every sample fail), and a run directory keeps the backend it was started with."""
    import torch

    from musacoder.bench.suites import default_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_backend(None)[0] == "cpu"
    assert default_backend(tmp_path / "fresh")[0] == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "Fake GPU")
    backend, why = default_backend(tmp_path / "fresh")
    assert backend == "cuda" and "Fake GPU" in why
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text(json.dumps({"backend": "triton"}))
    assert default_backend(tmp_path / "run")[0] == "triton"


def test_cli_bench_says_which_backend_it_chose(tmp_path, monkeypatch):
    import torch
    from typer.testing import CliRunner

    import musacoder.bench.runner as runner_mod
    from musacoder.cli import app

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runner_mod, "default_verifier", FakeVerifier())
    write_responses(tmp_path / "resp", {"1_relu_tiny": {"0.txt": "PASS 2.0"}})
    res = CliRunner().invoke(app, ["bench", "--model", f"dir:{tmp_path / 'resp'}", "--suite", SUITE, "--samples", "1",
                                   "--turns", "1", "--tasks", "1_relu_tiny", "--set", "batch_size=2", "--no-progress",
                                   "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert "backend cpu (no CUDA GPU is visible" in res.output
    assert json.loads((tmp_path / "run/config.json").read_text())["backend"] == "cpu"


def test_run_directory_gets_a_bench_manifest(tmp_path):
    from musacoder.manifest import read_manifest

    run_bench(_config(turns=1), tmp_path / "run", client=ScriptedClient(SCRIPT), verifier=FakeVerifier(),
              progress=False)
    m = read_manifest(tmp_path / "run")
    assert m.stage == "bench" and m.files["run"] == "." and m.files["summary"] == "summary.json"
    assert m.inputs == {"model": "dir:unused", "suite": SUITE} and m.info["backend"] == "cpu"
    run_bench(_config(turns=1), tmp_path / "quiet", client=ScriptedClient(SCRIPT), verifier=FakeVerifier(),
              progress=False, write_report=False)
    assert "summary" not in read_manifest(tmp_path / "quiet").files  # no report, none named
