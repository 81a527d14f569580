"""Every shell command in the README and docs/*.md is checked against the code, so a renamed flag or a moved file
fails here instead of in a reader's terminal.

Two checks:
- fast, for every `musacoder …` line in a fenced block (```bash, ```sh and the ```text synopses): the subcommand
  exists, every `--flag` is one of its options, every repository path it names (examples/…, a `--config` file)
  exists; `pip install -e ".[extras]"` names extras pyproject.toml defines;
- slow, for the runnable ```bash/```sh commands: each runs on the CPU in a scratch folder (with `examples/` reachable),
  as written or with the substitution `RUN` gives for it (smaller inputs, fewer steps; each with its reason). Commands
  that need a GPU, a model server or the network are in `SKIP`, each with its reason. A command in neither table
  fails the test: a new docs command must be classified here.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```", re.S | re.M)

# runnable command (as the docs join it) -> (what runs instead, why); the same text means "as written"
RUN: dict[str, tuple[str, str]] = {
    "musacoder verify --task examples/tasks/relu.py --candidate examples/candidates/relu_cpu.py": (
        "musacoder verify --task examples/tasks/relu.py --candidate examples/candidates/relu_cpu.py",
        "as written: the README's first verify"),
    "echo '{\"id\": \"relu\", \"task\": \"examples/tasks/relu.py\", \"candidate\": \"examples/candidates/relu_cpu.py\", "
    "\"backend\": \"cpu\"}' > batch.jsonl": (None, "as written"),
    "musacoder verify-batch batch.jsonl --out results.jsonl --workers 2": (
        "musacoder verify-batch batch.jsonl --out results.jsonl --workers 1", "one worker: a 2-core CI machine"),
    "musacoder bench --model dir:examples/data/responses --suite examples --samples 2 --turns 1 --out runs/try": (
        "musacoder bench --model dir:examples/data/responses --suite examples --tasks relu --samples 1 --turns 1 "
        "--verify-arg trials=2 --out runs/try", "one task, one sample: the other tasks add builds, not coverage"),
    "musacoder bench --model dir:examples/data/responses --suite examples --backend cpu --samples 2 --turns 1 "
    "--set batch_size=16 --out runs/cpu-smoke": (
        "musacoder bench --model dir:examples/data/responses --suite examples --backend cpu --tasks relu --samples 1 "
        "--turns 1 --set batch_size=16 --verify-arg trials=2 --out runs/cpu-smoke", "one task, one sample"),
    "musacoder report runs/cpu-smoke --compare runs/cpu-smoke": (None, "as written, on the run above"),
    "musacoder data tasks --out data/tasks --count 60 --seed 0": (
        "musacoder data tasks --out data/tasks --count 2 --seed 0", "2 tasks instead of 60: each is executed"),
    "musacoder train sft --config examples/sft/tiny_cpu.toml": (
        "musacoder train sft --config examples/sft/tiny_cpu.toml --epochs 1", "one epoch"),
    "musacoder train rl --config examples/rl/tiny_cpu.toml": (
        "musacoder train rl --config examples/rl/tiny_cpu.toml --set run.steps=2", "two steps"),
    "musacoder train rl --config examples/rl/tiny_cpu.toml --set run.steps=10 --set run.eval_every=5 --out-dir runs/try": (
        "musacoder train rl --config examples/rl/tiny_cpu.toml --set run.steps=2 --set run.eval_every=1 "
        "--out-dir runs/try-eval", "two steps, evaluated after each"),
    # docs/rl.md: each run folder is the next stage's input
    "musacoder train sft --config examples/sft/tiny_cpu.toml --out-dir runs/sft": (
        "musacoder train sft --config examples/sft/tiny_cpu.toml --epochs 1 --out-dir runs/sft", "one epoch"),
    "musacoder train rl --config examples/rl/tiny_cpu.toml --set model.name_or_path=runs/sft --out-dir runs/rl": (
        "musacoder train rl --config examples/rl/tiny_cpu.toml --set model.name_or_path=runs/sft --set run.steps=2 "
        "--set run.eval_every=0 --out-dir runs/rl", "two steps"),
    "musacoder bench --model hf:runs/rl --suite examples --samples 2 --max-tokens 64 --out runs/bench": (
        "musacoder bench --model hf:runs/rl --suite examples --tasks relu --samples 1 --max-tokens 16 "
        "--verify-arg trials=1 --out runs/bench", "one task, one short sample"),
    "musacoder train rl --config examples/rl/tiny_cpu.toml --set model.name_or_path=runs/rl --out-dir runs/rl2": (
        "musacoder train rl --config examples/rl/tiny_cpu.toml --set model.name_or_path=runs/rl --set run.steps=2 "
        "--set run.eval_every=0 --out-dir runs/rl2", "two steps"),
    # docs/sft.md: the chain data -> SFT -> RL -> bench, as written
    "mkdir -p runs/chain/tasks && cp examples/tasks/relu.py runs/chain/tasks/": (None, "as written"),
    "musacoder data solutions runs/chain/tasks --model dir:examples/data/responses --backend cpu --samples 1 --turns 1 "
    "--verify trials=1 --verify time_candidate=false --out runs/chain/data": (None, "as written"),
    "musacoder train sft --config examples/sft/chain_cpu.toml": (None, "as written"),
    "musacoder train rl --config examples/rl/chain_cpu.toml": (None, "as written"),
    "musacoder bench --model hf:runs/chain/rl --suite examples --tasks relu --backend cpu --samples 1 --turns 1 "
    "--max-tokens 16 --out runs/chain/bench": (None, "as written"),
    "musacoder serve --task-root examples/tasks": (None, "started in the background on a free port, see _serve"),
    "jq -n --rawfile c examples/candidates/relu_cpu.py '{task: \"relu\", candidate: $c}' | curl -s "
    "localhost:8000/v1/verify -H 'content-type: application/json' -d @-": (
        None, "against the server above; the answer must be an ok verdict"),
}

# command prefix -> why it is not run here (the fast check still covers its flags and files)
SKIP: dict[str, str] = {
    "pip install": "installs packages (CI installs .[dev] in .ci/run); the extras it names are checked",
    "python -m pytest": "the test run itself",
    "ray start": "starts a Ray cluster with GPUs",
    "musacoder serve --task-root ~/KernelBench": "serves the full KernelBench (GPU sizes); the README's serve runs",
    "musacoder serve --task-root $KERNELBENCH_DIR": "needs KernelBench; the README's serve runs",
    "musacoder bench --model openai:": "needs a model server (a GPU)",
    "jq -n --rawfile c examples/candidates/relu_cpu.py '{task: \"level1/19_ReLU\"": "needs a server on KernelBench",
    "python examples/verl/make_dataset.py ~/KernelBench": "needs KernelBench at ~/KernelBench; tests/integrations "
                                                          "runs make_dataset.py",
    "MUSACODER_SERVICE_TOKEN=$TOKEN python -m verl.trainer.main_ppo": "a verl training run on GPUs",
}


def _blocks():
    for doc in DOCS:
        for m in FENCE.finditer(doc.read_text()):
            yield doc, m.group(1), m.group(2)


def _commands(text: str) -> list[str]:
    """A block's commands: continuation lines joined, comment lines and trailing `  # …` comments dropped."""
    out, cur = [], ""
    for line in text.splitlines():
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        line = re.sub(r"\s{2,}#\s.*$", "", line)
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1].strip() + " "
            continue
        out.append(" ".join((cur + line.strip()).split()))
        cur = ""
    return out


def _shell_commands():
    return [(doc, cmd) for doc, lang, text in _blocks() if lang in ("bash", "sh") for cmd in _commands(text)]


def _musacoder_lines():
    seen = set()
    for doc, lang, text in _blocks():
        if lang not in ("bash", "sh", "text", ""):
            continue
        for cmd in _commands(text):
            for part in re.split(r"\s*(?:\||&&|;|>)\s*", cmd):
                if part.startswith("musacoder ") and (doc.name, part) not in seen:
                    seen.add((doc.name, part))
                    yield doc, part


def _click_command(words: list[str]):
    import typer

    from musacoder.cli import app

    cmd, used = typer.main.get_command(app), []
    for w in words:
        sub = getattr(cmd, "commands", {}).get(w)
        if sub is None:
            break
        cmd, used = sub, used + [w]
    return cmd, used


@pytest.mark.parametrize("doc,line", list(_musacoder_lines()), ids=lambda x: getattr(x, "name", str(x))[:70])
def test_musacoder_lines_use_real_subcommands_flags_and_files(doc, line):
    words = shlex.split(line.replace("[", " ").replace("]", " ").replace("…", " "))[1:]
    cmd, used = _click_command(words)
    assert used and not hasattr(cmd, "commands"), f"{doc.name}: `{line}`: no such musacoder subcommand"
    options = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    for token in words[len(used):]:
        if token.startswith("-") and not re.fullmatch(r"-\d.*", token):
            flag = token.split("=", 1)[0]
            assert flag in options, f"{doc.name}: `{line}`: `musacoder {' '.join(used)}` has no option {flag}"
    for token in words:
        path = token.removeprefix("dir:")
        if re.match(r"^(examples|docs|tests|benchmarks)/", path):
            assert (ROOT / path).exists(), f"{doc.name}: `{line}`: {path} does not exist"


def test_pip_extras_named_in_the_docs_exist():
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = []
    for doc, cmd in _shell_commands():
        for group in re.findall(r"""pip install[^|;&]*?(?:-e\s+)?["']?(?:\.|musacoder)\[([\w,\-]+)\]""", cmd):
            named += [(doc.name, e) for e in group.split(",")]
    assert named, "no `pip install -e .[extra]` found in the docs"
    missing = [(d, e) for d, e in named if e not in extras]
    assert not missing, f"extras named in the docs but not in pyproject.toml: {missing}"


def test_every_shell_command_is_run_or_skipped_with_a_reason():
    unclassified = [(d.name, c) for d, c in _shell_commands()
                    if c not in RUN and not any(c.startswith(p) for p in SKIP)]
    assert not unclassified, f"classify these docs commands in RUN or SKIP: {unclassified}"
    stale = [c for c in RUN if c not in {c for _, c in _shell_commands()}]
    assert not stale, f"RUN entries no docs page has any more: {stale}"


def _env(scratch: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELBENCH")}
    env.setdefault("MUSACODER_CACHE_DIR", str(ROOT / ".cache" / "musacoder"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = env.get("HOME", str(scratch))
    return env


def _run(command: str, scratch: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], cwd=scratch, env=_env(scratch),
                          capture_output=True, text=True, timeout=timeout)


def _serve(scratch: Path, command: str):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["bash", "-c", f"exec {command} --port {port}"], cwd=scratch, env=_env(scratch),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"`{command}` exited: {proc.stderr.read()}")
        if subprocess.run(["curl", "-sf", f"localhost:{port}/v1/health"], capture_output=True).returncode == 0:
            return proc, port
        time.sleep(0.5)
    proc.kill()
    raise AssertionError(f"`{command}` did not answer /v1/health")


@pytest.mark.slow
def test_docs_commands_run(tmp_path):
    """Each runnable docs command, in page order, in one scratch folder (later commands use earlier outputs)."""
    if not all(subprocess.run(["which", t], capture_output=True).returncode == 0 for t in ("jq", "curl")):
        pytest.skip("jq and curl are needed to run the service example (apt-get install jq curl)")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    server, ran = None, set()
    try:
        for doc, cmd in _shell_commands():
            if cmd not in RUN or cmd in ran:  # the README's first verify appears twice
                continue
            ran.add(cmd)
            substitute = RUN[cmd][0] or cmd
            if cmd.startswith("musacoder serve"):
                server = _serve(tmp_path, substitute)
                continue
            if "localhost:8000" in substitute:
                assert server, f"{doc.name}: `{cmd}` needs the serve command before it"
                substitute = substitute.replace("localhost:8000", f"localhost:{server[1]}")
            p = _run(substitute, tmp_path)
            assert p.returncode == 0, f"{doc.name}: `{substitute}` exited {p.returncode}:\n{p.stdout[-2000:]}\n" \
                                      f"{p.stderr[-2000:]}"
            if "/v1/verify" in substitute:
                assert '"status":"ok"' in p.stdout.replace(" ", ""), p.stdout[:500]
            if substitute.startswith("musacoder verify "):
                assert p.stdout.startswith("ok "), p.stdout[:500]
    finally:
        if server:
            os.killpg(server[0].pid, 15)
            server[0].wait(30)


def test_repository_paths_named_in_the_docs_exist():
    """A backticked path (`src/musacoder/…`, `judge/…`, `examples/…`, `tests/…`, …) in the README or docs/*.md names a
    file or folder that exists, at the repository root or under src/musacoder/ (`judge/stages/build.py`)."""
    pattern = re.compile(r"`((?:src/musacoder/|judge/|legality/|build/|examples/|tests/|benchmarks/|docs/)[\w./\-]*)`")
    missing = [(doc.name, m.group(1)) for doc in DOCS for m in pattern.finditer(doc.read_text())
               if not (ROOT / m.group(1)).exists() and not (ROOT / "src" / "musacoder" / m.group(1)).exists()]
    assert not missing, f"paths named in the docs that do not exist: {missing}"


def test_readme_error_table_is_the_one_in_errors_md():
    """The README carries docs/errors.md's table (between `<!-- error-table -->` markers) word for word."""
    def table(path: Path) -> str:
        parts = path.read_text().split("<!-- error-table -->")
        assert len(parts) == 3, f"{path.name}: expected one table between two <!-- error-table --> markers"
        return parts[1].strip()

    assert table(ROOT / "README.md") == table(ROOT / "docs" / "errors.md"), \
        "README's error table differs from docs/errors.md: copy the table between the markers again"
