"""Configuration of one MooreEval verification. Every option is documented where it is declared."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class UnusableArgument(ValueError):
    """The caller's arguments or settings cannot be verified with (an unknown backend, a compile baseline asked of
    MUSA). `musacoder.judge.pipeline.verify` raises it, and only it and a missing file, rather than give a verdict:
    every other error inside a verification is the verifier's (`infra_error`) or the candidate's."""


def default_cache_dir() -> Path:
    """Build cache root: `$MUSACODER_CACHE_DIR`, else `~/.cache/musacoder`."""
    env = os.environ.get("MUSACODER_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "musacoder"


class VerifyConfig(BaseModel):
    trials: int = Field(5, ge=1, description="Correctness trials, each on fresh inputs from a secret seed.")
    perturb_inputs: bool = Field(
        True,
        description="Draw half the trials' floating inputs from a second, non-uniform distribution "
        "(sign-preserving log-normal scaling) so partial computations that pass on uniform inputs fail.",
    )
    structured_trials: int = Field(
        2, ge=0, le=2,
        description="Extra correctness trials on structured inputs (zero-mean; zero-mean with one slice offset by 8 "
        "standard deviations): subsampled or partial work and reduced-precision arithmetic fail them.",
    )
    timing_inputs: Literal["center", "task"] = Field(
        "center",
        description="The timed rounds' inputs: 'center' (the task's own made zero-mean, where its domain allows and "
        "perturb_inputs is on): the distribution the strict checks have power on, so a kernel that cuts corners "
        "only on the task's own inputs gains no speed; 'task': the task's own get_inputs(), KernelBench's choice.",
    )
    rel_l2_tol: dict[str, float] = Field(
        default_factory=lambda: {"float32": 1e-2, "float64": 1e-2, "float16": 5e-2, "bfloat16": 5e-2},
        description="Bound on ||out-ref||/||ref|| per output dtype, checked next to allclose.",
    )
    extra_shapes: list[dict[str, int | float | bool | str]] = Field(
        default_factory=list,
        description="Extra size overrides (e.g. [{'batch_size': 3}]): a correct candidate is re-run at each in a fresh "
        "worker (2 trials); a candidate that hard-codes shapes fails as `incorrect`.",
    )
    timeout_s: float = Field(180.0, gt=0, description="Wall-clock limit for any one request to the candidate's worker "
                             "after the build (the call limits below are tighter).")
    call_limit_factor: float = Field(
        100.0, gt=1, description="A candidate call that takes this many times the reference's own forward (measured "
        "here on the same inputs) has failed already: it ends as `timeout` once over max(call_floor_s, factor × the "
        "reference), so a hang costs seconds and never holds the device for timeout_s.")
    call_floor_s: float = Field(10.0, gt=0, description="The least time any candidate call after the first is given.")
    first_call_s: float | None = Field(
        None, gt=0, description="The least time the candidate's first call is given (it may compile: Triton's JIT and "
        "autotuning, lazy module loading). None: 60 s for Triton, 20 s otherwise.")
    build_timeout_s: float = Field(900.0, gt=0, description="Wall-clock limit for building one candidate.")
    time_candidate: bool = Field(True, description="Run the timing stage for correct, legal candidates.")
    warmup: int = Field(3, ge=0, description="Untimed warm-up calls before timing.")
    repeats: int = Field(10, ge=1, description="Timed rounds (a candidate call and a reference call each) at least.")
    cap_repeats: int = Field(100, ge=1, description="Timed rounds at most while the speedup's interval is no wider than "
                             "twice `ratio_precision` (KernelBench times 100 runs); a wider one goes on to max_repeats.")
    max_repeats: int = Field(200, ge=1, description="Timed rounds at most, whatever the interval.")
    ratio_precision: float = Field(
        0.02, gt=0, description="Stop timing once the 95 % interval of the speedup (the median of the paired "
        "reference/candidate log-ratios, musacoder.judge.stopping) is within ± this fraction.")
    time_budget_s: float = Field(10.0, gt=0, description="Wall-clock limit of the timing loop, a last resort: the "
                                 "stopping rule counts rounds, so the time spent follows the kernel's own run time.")
    input_sets: int = Field(4, ge=1, description="Distinct input sets rotated through while timing (at most; fewer when "
                            "one set is large, see musacoder.judge.slots.Footprint.input_sets).")
    rechecks: int = Field(2, ge=0, description="Secretly chosen timing rounds re-checked against the reference: this many "
                          "run under the profiler (ops and kernels checked too), and this many more are ordinary timed rounds whose output is kept.")
    clean_reference: bool = Field(
        True, description="Also time the eager reference in a fresh reference-only worker (no candidate code) after "
        "the candidate's timing; the reference timed beside the candidate counts at most `clean_reference_tolerance` "
        "times that figure, so nothing a candidate leaves in its process can slow its baseline by more.")
    clean_reference_tolerance: float | None = Field(
        None, ge=1.0, description="τ: how much slower than in a clean worker the reference timed beside the candidate "
        "may count (the speedup is the paired in-worker figure, capped at τ·clean / candidate). None: 1.0 on a GPU "
        "(the two figures agree there, so the lower counts) and 1.25 on the CPU backend, where the clean figure, taken "
        "at another moment of a busy host, moves more than a paired one.")
    stored_reference_max_age_s: float | None = Field(
        None, gt=0, description="Opt-in: reuse the clean reference's timing that an earlier run stored under "
        "`cache_dir/baselines` for the same task key (source and sizes, device model, torch and CUDA versions, this "
        "config), if at most this many seconds old. Written only by reference-only workers, never by a candidate's; "
        "it can only lower a speedup (the clean figure is a cap). None: each run times it once per task.")
    clean_reference_reuse_s: float = Field(
        300.0, ge=0, description="A task's clean reference timing is reused by later batches of the same process (the "
        "service, an RL run's next steps) for this many seconds after a reference-only worker measured it, for the same "
        "task key; the verdict's flags say so. It depends on the inputs' distribution, not on the rotating secrets, and "
        "can only lower a speedup (it is a cap). 0: every batch times it again.")
    share_reference: bool = Field(
        True, description="Reuse a task's reference work (the correctness trials' reference outputs and yardsticks, the "
        "clean reference's timing) across the candidates of that task verified in one batch, service or process "
        "(musacoder.judge.task_cache): their correctness inputs come from one secret per task that rotates; each "
        "candidate's timed rounds keep inputs of their own. Off when `seed` is set.")
    baseline: Literal["eager", "compile"] = Field("eager", description="Speedup in the reward is measured against this baseline.")
    time_compile_baseline: bool = Field(False, description="Also time a torch.compile baseline (slow on CPU).")
    outlier_speedup: float = Field(10.0, gt=1, description="Speedups above this are re-timed and flagged.")
    reward_lambda: float = Field(0.5, description="λ in s = 1 + λ·min(max(ν−1,0), ν_max).")
    reward_nu_max: float = Field(4.0, description="ν_max in the reward's speedup term.")
    allow_vendor_libs: bool = Field(False, description="Policy switch: allow cuBLAS/cuDNN calls from inside the extension (strict: forbidden).")
    device: str | None = Field(None, description="Device to run on: 'cpu' or 'cuda[:N]'; default from the backend.")
    seed: int | None = Field(None, description="Master seed for inputs; default a fresh secret from os.urandom.")
    cache_dir: Path = Field(default_factory=default_cache_dir, description="Content-addressed build cache.")
    memory_limit_gb: float | None = Field(None, description="Address-space limit for the candidate worker (RLIMIT_AS); None = no limit (CUDA needs a large VA space).")
    max_device_memory_gb: float | None = Field(
        None, gt=0, description="Peak GPU memory the candidate's worker may reserve (its model, the reference copy, "
        "inputs and outputs included); None = 8 GiB + 16 × the task's weights, inputs and outputs. More is rejected as "
        "illegal: memory held back starves the reference (e.g. of cuBLAS/cuDNN workspace) and inflates the speedup.")
    require_sandbox: bool = Field(False, description="Refuse to run a candidate (infra_error) unless its worker entered "
                                  "every layer of musacoder.judge.isolation.STRICT_LAYERS; see `musacoder doctor`.")
    isolate_network: bool = Field(True, description="Run the candidate worker in its own network namespace (`unshare --net`) where permitted.")
    keep_workdir: bool = Field(False, description="Keep the candidate's throw-away working directory (debugging).")
