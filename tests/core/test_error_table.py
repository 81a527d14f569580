"""One test per row of the error table (docs/errors.md): each class of bad input gets its status, exit code and
message through `musacoder verify`. All but the signature row stop before any worker starts."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from musacoder.candidates import MAX_RESPONSE_CHARS
from musacoder.cli import app

REPO = Path(__file__).resolve().parents[2]
RELU = REPO / "examples" / "tasks" / "relu.py"
LEGIT = REPO / "examples" / "candidates" / "relu_cpu.py"
MODEL = "import torch\nimport torch.nn as nn\n\n\nclass {name}(nn.Module):\n    def forward(self, x):\n        return x\n"


def verify(*args: str):
    """`musacoder verify … --json` in process: (exit code, parsed verdict or None, stderr text)."""
    res = CliRunner().invoke(app, ["verify", *args, "--json", "--no-timing"])
    out = json.loads(res.stdout) if res.exit_code in (0, 3) and res.stdout.strip() else None
    return res.exit_code, out, res.stderr


def verify_text(tmp_path, text: str | bytes, *extra: str):
    cand = tmp_path / "response.txt"
    cand.write_bytes(text if isinstance(text, bytes) else text.encode())
    return verify("--task", str(RELU), "--candidate", str(cand), *extra)


def expect_extract_error(tmp_path, text, *needles):
    code, out, err = verify_text(tmp_path, text)
    assert code == 0, err
    assert out["status"] == "extract_error" and out["reward"] == -1.0, out["status"]
    for n in needles:
        assert n in out["error"], out["error"]
    return out


def test_empty_response(tmp_path):
    expect_extract_error(tmp_path, "  \n\t\n", "empty response")


def test_huge_prose_is_an_extract_error_not_infra(tmp_path):
    expect_extract_error(tmp_path, "blah " * 5000, "no code found")


def test_response_over_the_size_limit(tmp_path):
    text = "```python\n" + MODEL.format(name="ModelNew") + "# pad\n" * (MAX_RESPONSE_CHARS // 6) + "```\n"
    expect_extract_error(tmp_path, text, f"longer than {MAX_RESPONSE_CHARS} characters")


@pytest.mark.parametrize("data", [b"\x00\x01binary\xff\xfe", b"\x89PNG\r\n\x1a\n\x00\x00"], ids=["nul", "png"])
def test_binary_bytes(tmp_path, data):
    expect_extract_error(tmp_path, data, "binary data")


def test_prose_without_code(tmp_path):
    expect_extract_error(tmp_path, "I would write a fused kernel, but here is only the idea.", "no code found")


def test_other_language_blocks_only(tmp_path):
    expect_extract_error(tmp_path, "```cpp\nint main() { return 0; }\n```\n", "only in cpp")


def test_unterminated_fence(tmp_path):
    expect_extract_error(tmp_path, "```python\n" + MODEL.format(name="ModelNew"), "unterminated")


def test_several_blocks_last_one_judged(tmp_path):
    text = f"First:\n```python\n{MODEL.format(name='ModelNew')}```\nThen a test:\n```python\nprint(1)\n```\n"
    expect_extract_error(tmp_path, text, "the last Python block does not define class ModelNew")


def test_syntax_error_in_plain_code_names_the_line(tmp_path):
    text = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x)\n        return x\n"
    out = expect_extract_error(tmp_path, text, "does not parse: line 5")
    assert "no code found" not in out["error"]


def test_syntax_error_in_block_names_the_line(tmp_path):
    expect_extract_error(tmp_path, "```python\nclass ModelNew:\n    def f(:\n```\n", "does not parse: line 2")


def test_wrong_class_name(tmp_path):
    expect_extract_error(tmp_path, f"```python\n{MODEL.format(name='MyModel')}```", "does not define class ModelNew",
                         "MyModel")


def test_wrong_forward_signature_is_the_candidates_runtime_error(tmp_path):
    code = LEGIT.read_text().replace("def forward(self, x: torch.Tensor)", "def forward(self, x: torch.Tensor, y)")
    assert code != LEGIT.read_text()
    code_, out, err = verify_text(tmp_path, code, "--trials", "1")
    assert code_ == 0, err
    assert out["status"] == "runtime_error", (out["status"], out["error"])
    assert "forward()" in out["error"] and "'y'" in out["error"]
    assert "fix correctness first" not in out["feedback"]


@pytest.mark.parametrize("setting, needle", [
    ("batch_size=abc", "bad value for batch_size"),
    ("batch_size=2.5", "bad value for batch_size"),
    ("nope=3", "unknown size constant"),
    ("batch_size", "expected NAME=VALUE"),
])
def test_bad_set_is_a_usage_error_before_any_work(tmp_path, monkeypatch, setting, needle):
    from musacoder.judge import pipeline

    monkeypatch.setattr(pipeline, "verify", lambda *a, **k: pytest.fail("verify ran despite a bad --set"))
    code, out, err = verify("--task", str(RELU), "--candidate", str(LEGIT), "--set", setting)
    assert code == 2 and out is None
    assert needle in err


def test_bad_extra_shape_is_a_usage_error(tmp_path):
    code, _, err = verify("--task", str(RELU), "--candidate", str(LEGIT), "--extra-shape", "dim=big")
    assert code == 2 and "bad value for dim" in err


def test_missing_task_file(tmp_path):
    code, _, err = verify("--task", str(tmp_path / "nope.py"), "--candidate", str(LEGIT))
    assert code == 2 and "task file not found" in err


def test_task_not_in_kernelbench_format(tmp_path):
    task = tmp_path / "t.py"
    task.write_text("x = 1\n")
    code, _, err = verify("--task", str(task), "--candidate", str(LEGIT))
    assert code == 2 and "not a KernelBench-format problem" in err


def _unreadable(monkeypatch, target: Path):
    """Make `target` unreadable to this process (chmod does not stop root, so open() is refused for it)."""
    import builtins
    import io

    real_open, real_read = builtins.open, Path.read_text

    def refuse(path):
        if Path(path) == target:
            raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: refuse(f) or real_open(f, *a, **k))
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: refuse(self) or real_read(self, *a, **k))
    monkeypatch.setattr(io, "open", builtins.open)


def test_unreadable_candidate_file(tmp_path, monkeypatch):
    cand = tmp_path / "c.py"
    cand.write_text(LEGIT.read_text())
    _unreadable(monkeypatch, cand)
    code, _, err = verify("--task", str(RELU), "--candidate", str(cand))
    assert code == 2 and "candidate file cannot be read" in err and "Permission denied" in err


def test_unreadable_task_file(tmp_path, monkeypatch):
    task = tmp_path / "t.py"
    task.write_text(RELU.read_text())
    _unreadable(monkeypatch, task)
    code, _, err = verify("--task", str(task), "--candidate", str(LEGIT))
    assert code == 2 and "task file cannot be read" in err


def test_missing_candidate_file(tmp_path):
    code, _, err = verify("--task", str(RELU), "--candidate", str(tmp_path / "missing.py"))
    assert code == 2 and "candidate file not found" in err


def test_unknown_backend(tmp_path):
    code, _, err = verify("--task", str(RELU), "--candidate", str(LEGIT), "--backend", "rocm")
    assert code == 2 and "--backend must be one of" in err


def test_verifier_failure_is_infra_error_exit_3(tmp_path, monkeypatch):
    from musacoder.legality import static

    def broken(*args, **kwargs):  # a fault of the trusted side's own code
        raise RuntimeError("harness fault")

    monkeypatch.setattr(static, "check_static", broken)
    code, out, err = verify("--task", str(RELU), "--candidate", str(LEGIT))
    assert code == 3 and out["status"] == "infra_error" and out["reward"] is None
    assert "harness fault" in out["error"] and "Next:" not in out["feedback"]


@pytest.mark.parametrize("fault", [ValueError, FileNotFoundError])
def test_value_error_of_the_verifier_is_infra_error_not_raised(monkeypatch, fault):
    """Only unusable arguments leave `verify` as exceptions: a `ValueError` (or a missing file) raised by the
    verifier's own code inside the stages is an `infra_error` verdict, never the end of the caller's batch."""
    from musacoder.judge import pipeline
    from musacoder.legality import static

    def broken(*args, **kwargs):
        raise fault("a guard of the trusted side's own code")

    monkeypatch.setattr(static, "check_static", broken)
    v = pipeline.verify(RELU, LEGIT, backend="cpu")
    assert v.status == "infra_error" and "guard of the trusted side" in v.error


def test_unknown_backend_through_the_api_is_an_unusable_argument():
    from musacoder.config import UnusableArgument
    from musacoder.judge import pipeline

    with pytest.raises(UnusableArgument, match="unknown backend 'rocm'"):
        pipeline.verify(RELU, LEGIT, backend="rocm")
    assert issubclass(UnusableArgument, ValueError)  # callers that catch ValueError keep working


def test_table_in_docs_lists_every_tested_row():
    doc = (REPO / "docs" / "errors.md").read_text()
    table = doc.split("<!-- error-table -->")[1]
    for needle in ("empty response", "prose without code", "size limit", "binary bytes", "several Python blocks",
                   "syntax error", "wrong class name", "wrong `forward` signature", "--set", "missing task file",
                   "unreadable task file", "unreadable candidate file", "unknown backend", "`infra_error` | 3"):
        assert needle in table, needle
