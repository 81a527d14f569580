"""A drop-in `nvcc` for extension builds that runs the host and the device front end of one compile at the same time.

nvcc compiles a `.cu` file in sequence: preprocess for the host, `cudafe++` (host front end, which also writes the
module id), preprocess for the device, `cicc` (device front end), `ptxas`, `fatbinary`, then the host compiler on
what `cudafe++` produced. With PyTorch's headers, the two front ends and the final host compile each spend seconds
parsing the same headers, and only the last step needs both halves. This driver asks nvcc for its plan
(`--dryrun`), writes the module id itself so that neither front end waits for the other, runs the host chain and the
device chain in parallel, then the final host compile. Same tools, same flags, same outputs, in less time on a
machine with cores to spare (docs/benchmarks.md, build latency).

Anything it does not recognise (several GPU architectures, relocatable device code, a plan of an unexpected shape,
a failed dry run) is handed to the real nvcc unchanged. Compiler errors are reported as nvcc would report them: the
failing tool's own messages and a non-zero exit.

Used through PyTorch's `PYTORCH_NVCC` variable (see `musacoder.build.cache.toolchain_env`); stdlib only, so it starts
in milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

TMP_TOKEN = re.compile(r"tmpxft_[0-9a-f]+_[0-9a-f]+")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Options under which this driver steps aside (they change what nvcc plans).
PASS_THROUGH = {"--dryrun", "-dryrun", "-E", "-M", "-MM", "-dc", "-rdc=true", "--relocatable-device-code=true",
                "--keep", "-keep", "-cuda", "--cuda", "-ptx", "--ptx", "-cubin", "--cubin", "-fatbin", "--fatbin",
                "-lib", "--lib", "-link", "--link", "-G", "--device-debug"}


def real_nvcc() -> str:
    explicit = os.environ.get("MUSACODER_REAL_NVCC")
    if explicit:
        return explicit
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    return os.path.join(home, "bin", "nvcc")


@dataclass
class Plan:
    assignments: list[str]
    device_chain: list[str]  # device preprocess, cicc, ptxas, fatbinary
    host_chain: list[str]  # host preprocess (with the dependency file), cudafe++
    final: str  # the host compile of cudafe++'s output, with the fat binary embedded
    module_id_file: str
    module_id: str
    token: str
    tmpdir: str
    output: str = ""  # the object file; `<output>.steps.json` records each part's seconds


def _option_value(argv: list[str], name: str) -> str | None:
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return None


def _module_id(source: str, token: str) -> str:
    """An id in nvcc's own form (`_<hash>_<len>_<file name>_<hash>`), unique per compile."""
    base = re.sub(r"[^A-Za-z0-9]", "_", os.path.basename(source))
    h = hashlib.sha256(f"{os.path.abspath(source)}:{token}".encode()).hexdigest()
    return f"_{h[:8]}_{len(base)}_{base}_{h[8:16]}"


def make_plan(argv: list[str], nvcc: str) -> Plan | None:
    """The parallel plan for `nvcc argv`, or None when this driver should step aside."""
    if "-c" not in argv or any(a in PASS_THROUGH for a in argv):
        return None
    if sum(a.startswith(("-gencode", "--generate-code")) for a in argv) > 1 or "," in (_option_value(argv, "-arch") or ""):
        return None
    sources = [a for a in argv if a.endswith(".cu") and not a.startswith("-")]
    output = _option_value(argv, "-o")
    if len(sources) != 1 or not output:
        return None
    try:
        dry = subprocess.run([nvcc, *argv, "--dryrun"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if dry.returncode != 0:
        return None
    lines = [ln[3:].strip() for ln in dry.stderr.splitlines() if ln.startswith("#$ ")]
    assignments = [ln for ln in lines if ASSIGNMENT.match(ln)]
    cmds = [ln for ln in lines if not ASSIGNMENT.match(ln) and not ln.startswith(("--", "rm "))]

    def one(pred) -> str | None:
        got = [c for c in cmds if pred(c)]
        return got[0] if len(got) == 1 else None

    def tool(c: str) -> str:
        return os.path.basename(shlex.split(c)[0]) if c else ""

    dev_pre = one(lambda c: tool(c) in ("gcc", "g++", "c++", "cc") and " -E " in c and "-D__CUDA_ARCH__=" in c)
    host_pre = one(lambda c: tool(c) in ("gcc", "g++", "c++", "cc") and " -E " in c and "-D__CUDA_ARCH__=" not in c)
    final = one(lambda c: tool(c) in ("gcc", "g++", "c++", "cc") and " -c " in c)
    cudafe = one(lambda c: tool(c) == "cudafe++")
    cicc = one(lambda c: tool(c) == "cicc")
    ptxas = one(lambda c: tool(c) == "ptxas")
    fatbin = one(lambda c: tool(c) == "fatbinary")
    steps = [dev_pre, host_pre, final, cudafe, cicc, ptxas, fatbin]
    if any(s is None for s in steps) or len(cmds) != len(steps):
        return None
    if "--gen_module_id_file" not in cudafe or "--module_id_file_name" not in cicc:
        return None
    tokens = set(TMP_TOKEN.findall("\n".join(cmds)))
    if len(tokens) != 1:
        return None
    old = tokens.pop()
    token = f"mcnv_{os.getpid():x}_{os.urandom(6).hex()}"
    swap = lambda c: c.replace(old, token)  # noqa: E731 - fresh temporary names for this compile
    dev_pre, host_pre, final, cudafe, cicc, ptxas, fatbin = map(swap, steps)
    ids = [a for a in shlex.split(cudafe) if a.endswith(".module_id")]
    if len(ids) != 1:
        return None
    cudafe = cudafe.replace("--gen_module_id_file", "", 1)  # read the id written below instead of making one
    depfile = _option_value(argv, "-MF")
    if depfile and ("-MD" in argv or "-M" in argv or "--generate-dependencies-with-compile" in argv):
        host_pre += f" -MD -MF {shlex.quote(depfile)} -MT {shlex.quote(output)}"
    tmpdir = os.path.dirname(ids[0]) or tempfile.gettempdir()
    return Plan(assignments, [dev_pre, cicc, ptxas, fatbin], [host_pre, cudafe], final, ids[0],
                _module_id(sources[0], token), token, tmpdir, output)


def _env(plan: Plan) -> dict[str, str]:
    """The environment nvcc sets for its tools (PATH with nvvm/bin, CICC_PATH, ...), from the dry run's `NAME=VALUE`
    lines (values are taken verbatim, one surrounding pair of quotes removed)."""
    env = dict(os.environ)
    for a in plan.assignments:
        name, _, value = a.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"' and value.count('"') == 2:
            value = value[1:-1]
        env[name] = value
    return env


def _script(cmds: list[str]) -> str:
    return "\n".join(["set -e"] + cmds) + "\n"


def run(plan: Plan) -> int:
    with open(plan.module_id_file, "w") as f:
        f.write(plan.module_id)
    try:
        env = _env(plan)
        t0 = time.monotonic()
        procs = [subprocess.Popen(["bash", "-c", _script(chain)], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT) for chain in (plan.host_chain, plan.device_chain)]
        outs, ends = [b"", b""], [0.0, 0.0]

        def drain(i: int) -> None:  # each chain's output and the moment it ended
            outs[i] = procs[i].communicate()[0]
            ends[i] = time.monotonic() - t0

        drains = [threading.Thread(target=drain, args=(i,)) for i in range(2)]
        for d in drains:
            d.start()
        for d in drains:
            d.join()
        failed = [(p.returncode, out) for p, out in zip(procs, outs) if p.returncode]
        if failed:  # both front ends see the same errors: report the first failing chain's, as nvcc would
            sys.stderr.buffer.write(failed[0][1])
            return failed[0][0]
        for out in outs:
            sys.stderr.buffer.write(out)
        t1 = time.monotonic()
        rc = subprocess.run(["bash", "-c", _script([plan.final])], env=env).returncode
        _record(plan, {"host_chain_s": ends[0], "device_chain_s": ends[1], "front_ends_s": t1 - t0,
                       "final_host_compile_s": time.monotonic() - t1})
        return rc
    finally:
        for name in os.listdir(plan.tmpdir):
            if name.startswith(plan.token):
                try:
                    os.unlink(os.path.join(plan.tmpdir, name))
                except OSError:
                    pass


def _record(plan: Plan, seconds: dict[str, float]) -> None:
    """Where this compile's time went, beside its object file (read by benchmarks/build_latency.py)."""
    if plan.output:
        try:
            with open(plan.output + ".steps.json", "w") as f:
                json.dump({k: round(x, 3) for k, x in seconds.items()}, f)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    nvcc = real_nvcc()
    plan = None if os.environ.get("MUSACODER_PARALLEL_NVCC", "1") == "0" else make_plan(argv, nvcc)
    if plan is None:
        os.execv(nvcc, [nvcc, *argv])
    sys.stderr.flush()
    return run(plan)


if __name__ == "__main__":
    sys.exit(main())
