"""Feedback text for the model's next turn, a pure function of the verdict.

Two branches, as in the paper: a correct, legal candidate is told its timings and to optimise only; anything else is
told what failed (trimmed compiler errors, failing trials with their errors, illegal ops and where they came from)
and what to do next for that status (`NEXT`): only an `incorrect` verdict is a correctness failure; a crash, a hang,
an illegal answer or an unusable response each get their own advice, and a verifier failure gets none.
"""

from __future__ import annotations

import re

from musacoder.records import Verdict

FEEDBACK_HEADER = "=== System Feedback for Round {n} ==="
_MAX_LOG_LINES = 30


def trim_compiler_log(log: str, max_lines: int = _MAX_LOG_LINES) -> str:
    """Keep the lines that carry errors (and one line of context after each), drop command lines and noise."""
    lines = [ln for ln in log.splitlines() if ln.strip()]
    keep: list[str] = []
    for i, ln in enumerate(lines):
        if re.search(r"\berror\b|error:|undefined reference|fatal|Error \d", ln, re.I) and not ln.lstrip().startswith(("[", "FAILED:", "ninja:")):
            keep.append(_short_path(ln))
            if i + 1 < len(lines) and not re.search(r"error", lines[i + 1], re.I):
                keep.append(_short_path(lines[i + 1]))
    if not keep:
        keep = [_short_path(ln) for ln in lines[-max_lines:]]
    if len(keep) > max_lines:
        keep = keep[:max_lines] + [f"... ({len(keep) - max_lines} more lines)"]
    return "\n".join(dict.fromkeys(keep))


def _short_path(line: str) -> str:
    return re.sub(r"/\S*/(main\.cpp|cuda\.cu|musa\.mu|[\w.-]+\.(?:cpp|cu|h|cuh|mu|muh))", r"\1", line)[:300]


def render_feedback(v: Verdict, round_index: int | None = None) -> str:
    parts: list[str] = []
    if round_index is not None:
        parts.append(FEEDBACK_HEADER.format(n=round_index))
    s = v.status
    if s == "ok":
        parts.append("Your kernel compiled, passed every correctness trial and uses no PyTorch fallback.")
        if v.runtime_ms is not None and v.ref_runtime_ms is not None:
            line = f"Timing: your ModelNew {v.runtime_ms:.4g} ms vs PyTorch eager {v.ref_runtime_ms:.4g} ms (speedup {v.speedup_vs_eager:.3g}x)"
            if v.speedup_vs_compile is not None and v.compile_runtime_ms is not None:
                line += f"; torch.compile {v.compile_runtime_ms:.4g} ms (speedup {v.speedup_vs_compile:.3g}x)"
            parts.append(line + ".")
        for f in v.flags:
            parts.append(f"Note: {f}")
        parts.append("Next: keep it correct and optimise only — fuse work, improve memory access and parallelism.")
        return "\n".join(parts)
    headline = {
        "extract_error": "No usable code was found in your answer.",
        "illegal": "Your answer was rejected as an illegal fallback or unsafe code.",
        "compile_error": "Your extension failed to compile.",
        "runtime_error": "Your code raised an error when run.",
        "incorrect": "Your kernel ran but its outputs are wrong.",
        "timeout": "Your code did not finish within the time limit (hang, deadlock or far too slow).",
        "crashed": "Your code crashed the worker process (segfault, illegal memory access or out of memory).",
        "infra_error": "The verifier could not finish (not your fault).",
    }[s]
    parts.append(headline)
    if v.violations:
        parts.append("Violations:")
        parts.extend(f"- {x}" for x in v.violations[:12])
    if s == "compile_error" and v.compile_log:
        parts.append("Compiler output (trimmed):")
        parts.append(trim_compiler_log(v.compile_log))
    if v.trials:
        failed = [t for t in v.trials if not t.passed]
        parts.append(f"Correctness: {len(v.trials) - len(failed)}/{len(v.trials)} trials passed.")
        for t in failed[:5]:
            parts.append(f"- trial {t.trial}: {t.message}")
    if v.systematic_defect and s == "incorrect":
        parts.append(f"Systematic defect (no partial credit): {v.systematic_defect}.")
    if v.error and s in ("runtime_error", "crashed", "timeout", "infra_error", "extract_error"):
        parts.append(_tail(v.error, 25))
    if s in NEXT:
        parts.append(NEXT[s])
    return "\n".join(parts)


# What to do next, per failing status (`infra_error` has none: the verifier failed, not the candidate).
NEXT = {
    "extract_error": "Next: answer with exactly one ```python block that defines class ModelNew(nn.Module), with any "
                     "C++/CUDA source inside it as strings.",
    "illegal": "Next: remove what the violations name — compute only in your own kernels (no PyTorch compute ops, "
               "fallbacks, submodule calls or broad try/except in forward).",
    "compile_error": "Next: fix the compiler errors above; the rest of the answer was not run.",
    "runtime_error": "Next: fix the error above (argument counts and types, shapes, dtypes and devices passed to your "
                     "kernels), then check correctness.",
    "incorrect": "Next: fix correctness first — the output must match the reference exactly in structure, shape and "
                 "dtype, within tolerance, computed by your own kernels with no PyTorch compute ops.",
    "timeout": "Next: make every kernel and loop terminate (no unbounded loops, deadlocks or waits on other blocks) and "
               "launch enough parallel work for the full input size.",
    "crashed": "Next: find the crash — check index bounds of every read and write, the sizes of what you allocate and "
               "the launch configuration against the input shapes.",
}


def _tail(text: str, n: int) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[-n:])
