"""Machine-code legality: kernels that read a clock, found in what was compiled.

A kernel that reads a clock (`clock64()` or `%globaltimer` on the GPU, Triton's `tl.extra.cuda.globaltimer()`,
`rdtsc` on the CPU) can time the gaps between its own calls, and the gaps differ between the rounds the profiler
watches and the rounds the clock times: the channel a candidate would need to behave only while watched. The source
rules reject the names (`musacoder.legality.policy`); a name the source hides (a macro, literals split apart, a
string built at run time) still compiles to the same instructions, so the trusted side reads them here:

- GPU code in an extension library: the SASS and PTX of its fat binary, through `cuobjdump` (the CUDA toolkit's, or
  the one Triton ships): the special registers `SR_CLOCKLO`, `SR_CLOCKHI`, `SR_GLOBALTIMERLO`, `SR_GLOBALTIMERHI` in
  SASS, `%clock`, `%clock64`, `%clock_hi`, `%globaltimer` (and its halves) in PTX;
- CPU code in an extension library, through `objdump -d -r`: `rdtsc`, `rdtscp`, `rdpmc` (x86-64), reads of the
  counter registers `cntvct_el0`, `cntpct_el0`, `pmccntr_el0` (AArch64), and calls of the GPU's event timer
  (`cudaEventElapsedTime`) from anywhere but the device guard's `elapsedTime` that `c10/cuda/CUDAGuard.h` emits in
  every CUDA extension (and calls of that method);
- a Triton kernel: the PTX Triton compiled it to (`ptx_clock_reads`, run by the worker as Triton makes each
  compiled kernel).

The other special registers (thread and block indices, lane masks) are not clocks and are not judged. Where a tool
is missing the library is not read for that part, and the verdict says so in its flags.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

_SASS_CLOCK = re.compile(r"\bSR_(?:CLOCKLO|CLOCKHI|GLOBALTIMERLO|GLOBALTIMERHI|GLOBALTIMER)\b")
_PTX_CLOCK = re.compile(r"%(?:clock64|clock_hi|clock|globaltimer_lo|globaltimer_hi|globaltimer)\b")
_SASS_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_PTX_ENTRY = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")
_FATBIN_SECTIONS = (b".nv_fatbin", b"__nv_relfatbin", b".nvFatBinSegment")
READ_TIMEOUT_S = 300  # per tool and library; a 1.4 MB CUDA extension takes about 1.5 s
_HOST_CLOCK = re.compile(r"\s(rdtscp?|rdpmc)\b|\bmrs\s+\w+,\s*(cntvct_el0|cntpct_el0|pmccntr_el0)\b", re.I)
_HOST_FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:\s*$")
# the GPU's event timer, called from the CPU: every CUDA extension holds one caller, the `elapsedTime` of the device
# guard that c10/cuda/CUDAGuard.h emits with its vtable; a call from anywhere else (or to that method) is a clock
_EVENT_TIMER = re.compile(r"\b(?:cuda|cu|musa|mu)EventElapsedTime\w*|\bc10::(?:cuda|musa)::impl::\w+GuardImpl::elapsedTime\b")
# a word each match of `_HOST_CLOCK` or `_EVENT_TIMER` contains (lower case): the lines worth matching
_HOST_WORDS = ("rdtsc", "rdpmc", "cntvct_el0", "cntpct_el0", "pmccntr_el0", "elapsedtime")
_EVENT_TIMER_OWNER = re.compile(r"^c10::(?:cuda|musa)::impl::\w+GuardImpl::elapsedTime\(")


class ToolMissing(RuntimeError):
    """No cuobjdump or objdump to read the machine code with."""


def find_cuobjdump() -> str | None:
    """The CUDA toolkit's `cuobjdump` (CUDA_HOME, CUDA_PATH, /usr/local/cuda, PATH), else the one Triton ships."""
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(p := os.path.join(home, "bin", "cuobjdump"), os.X_OK):
            return p
    if found := shutil.which("cuobjdump"):
        return found
    try:
        import triton

        p = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        return str(p) if os.access(p, os.X_OK) else None
    except Exception:  # noqa: BLE001 - no triton
        return None


def has_device_code(path: Path) -> bool:
    """Whether the library carries a CUDA fat binary (a C++-only extension has none and is not read)."""
    with open(path, "rb") as f:
        data = f.read()
    return any(name in data for name in _FATBIN_SECTIONS)


def clock_reads_in(text: str, pattern: re.Pattern, heading: re.Pattern) -> list[tuple[str, str]]:
    """(kernel, register) for each clock read in a disassembly listing, the kernel named by the nearest heading."""
    out, kernel = [], "?"
    for line in text.splitlines():
        if h := heading.match(line):
            kernel = h.group(1)
            continue
        for m in pattern.finditer(line.split("//")[0] if pattern is _PTX_CLOCK else line):
            out.append((kernel, m.group(0)))
    return out


def ptx_clock_reads(ptx: str) -> list[tuple[str, str]]:
    """(kernel, register) for each clock register a PTX listing reads."""
    return clock_reads_in(ptx, _PTX_CLOCK, _PTX_ENTRY)


@functools.lru_cache(maxsize=4096)
def _library_clock_reads(path: str, _mtime_ns: int, _size: int, tool: str) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    for flag, pattern, heading in (("-sass", _SASS_CLOCK, _SASS_FUNCTION), ("-ptx", _PTX_CLOCK, _PTX_ENTRY)):
        code, listing, err = _run_tool([tool, flag, path])
        if code != 0 and "does not contain" not in err:
            raise OSError(f"cuobjdump {flag} failed on {Path(path).name}: {err.strip()[-300:]}")
        found += clock_reads_in(listing, pattern, heading)
    return tuple(dict.fromkeys(found))


@functools.lru_cache(maxsize=4096)
def _host_clock_reads(path: str, _mtime_ns: int, _size: int, tool: str) -> tuple[tuple[str, str], ...]:
    code, listing, err = _run_tool([tool, "-d", "-r", "-C", "--no-show-raw-insn", path])
    if code != 0:
        raise OSError(f"objdump failed on {Path(path).name}: {err.strip()[-300:]}")
    return host_clock_reads_in(listing)


def _run_tool(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a disassembler. Its listing (tens of MB for a CUDA extension) goes to a
    temporary file and is read in one piece: read through a pipe it came in thousands of chunks, each waiting for the
    interpreter's lock, and a verifier busy in other threads took seconds over it."""
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        r = subprocess.run(argv, stdout=out, stderr=err, timeout=READ_TIMEOUT_S)
        out.seek(0)
        err.seek(0)
        return r.returncode, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")


def host_clock_reads_in(listing: str) -> tuple[tuple[str, str], ...]:
    """(function, instruction or callee) for each clock read in an `objdump -d -r -C` listing: the first clock
    instruction of a line, else its first call of the event timer from a function other than the device guard's
    `elapsedTime` and the PLT stubs. A CUDA extension's listing has some 300,000 lines, and a Python loop over them
    took seconds in a busy verifier: only the lines holding a word every pattern needs (`_HOST_WORDS`, found by
    substring search) are matched, each with the function heading that precedes it."""
    low = listing.lower()
    starts = set()
    for word in _HOST_WORDS:
        at = low.find(word)
        while at >= 0:
            starts.add(listing.rfind("\n", 0, at) + 1)
            at = low.find(word, at + 1)
    found = []
    for start in sorted(starts):
        end = listing.find("\n", start)
        line = listing[start:end if end >= 0 else len(listing)]
        if _HOST_FUNCTION.match(line):
            continue  # a heading names a function; it is not an instruction
        function = _function_before(listing, start)
        if m := _HOST_CLOCK.search(line):
            found.append((function, (m.group(1) or m.group(2)).lower()))
        elif (m := _EVENT_TIMER.search(line)) and not function.endswith("@plt") \
                and not _EVENT_TIMER_OWNER.match(function):
            found.append((function, m.group(0)))
    return tuple(dict.fromkeys(found))


def _function_before(listing: str, start: int) -> str:
    """The function named by the last heading line (`0000000000001234 <name>:`) before offset `start`, "?" if none."""
    end = start
    while (at := listing.rfind(">:\n", 0, end)) >= 0:
        line_start = listing.rfind("\n", 0, at) + 1
        if h := _HOST_FUNCTION.match(listing[line_start:at + 2]):
            return h.group(1)
        end = at
    return "?"


def _messages(path: Path, reads, what: str, clock: str) -> list[str]:
    by_function: dict[str, list[str]] = {}
    for function, reg in reads:
        by_function.setdefault(function, []).append(reg)
    return [f"{what} {function} in {path.name} reads the {clock}'s clock ({', '.join(dict.fromkeys(regs))}): code "
            "that times itself can tell the rounds the profiler watches from the timed ones"
            for function, regs in by_function.items()]


def library_clock_reads(path: Path, cuobjdump: str | None = None, objdump: str | None = None,
                        seconds: dict[str, float] | None = None) -> list[str]:
    """A message for each kernel (GPU) and function (CPU) of the library at `path` that reads a clock (and one if the
    library is too large to read in `READ_TIMEOUT_S`). Raises `ToolMissing` where a tool is missing and `OSError`
    where one fails (neither is the candidate's), after reading what it could. `seconds`, when given, accumulates the
    time spent on the CPU code (`cpu_code`) and the GPU code (`gpu_code`)."""
    import time

    path = Path(path)
    seconds = {} if seconds is None else seconds
    st = path.stat()
    out, missing = [], []

    def timed(part: str, reads, tool: str, what: str, clock: str) -> None:
        t0 = time.monotonic()
        try:
            out.extend(_messages(path, reads(str(path), st.st_mtime_ns, st.st_size, tool), what, clock))
        finally:
            seconds[part] = seconds.get(part, 0.0) + time.monotonic() - t0

    objdump = objdump or shutil.which("objdump")
    try:
        if objdump is None:
            missing.append("objdump (binutils), for the CPU code")
        else:
            timed("cpu_code", _host_clock_reads, objdump, "the function", "CPU")
        if has_device_code(path):
            cuobjdump = cuobjdump or find_cuobjdump()
            if cuobjdump is None:
                missing.append("cuobjdump (CUDA toolkit or Triton), for the GPU code")
            else:
                timed("gpu_code", _library_clock_reads, cuobjdump, "the kernel", "GPU")
    except subprocess.TimeoutExpired:  # a library a kernel does not need (an honest one reads in a second or two)
        return [f"the built extension {path.name} ({st.st_size >> 20} MB) could not be read for clock reads within "
                f"{READ_TIMEOUT_S} s; a kernel's library is far smaller"]
    if missing and not out:
        raise ToolMissing("no " + " or ".join(missing))
    return out


def tools_report() -> str:
    """Which tools this host has for the rule (for `musacoder doctor`): without them libraries go unread, flagged."""
    objdump, cuobjdump = shutil.which("objdump"), find_cuobjdump()
    cpu = f"CPU code read with {objdump}" if objdump else "CPU code NOT read (no objdump: install binutils)"
    gpu = f"GPU code read with {cuobjdump}" if cuobjdump else \
        "GPU code NOT read (no cuobjdump: the CUDA toolkit's, or Triton's)"
    return f"machine-code rule (clock reads in built extensions): {cpu}; {gpu}"
