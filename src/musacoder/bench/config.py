"""Settings of one benchmark run (`BenchConfig`, stored as the run's config.json): read by the runner that makes the
run and by the report that summarises it."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, Field


class BenchConfig(BaseModel):
    """Settings of one benchmark run (stored as the run's config.json)."""

    model: str = Field(description="Model spec: openai:BASE_URL#MODEL, vllm:PATH_OR_NAME, hf:PATH or dir:PATH "
                       "(hf:PATH: a model folder, or a `train sft|rft|rl` output folder).")
    model_args: dict[str, Any] = Field(default_factory=dict, description="Client options (--model-arg KEY=VALUE).")
    suite: str = Field("examples", description="kernelbench:level1[,…], kernelbench, examples or dir:PATH.")
    kernelbench_dir: str | None = Field(None, description="KernelBench root (default $KERNELBENCH_DIR).")
    tasks: list[str] = Field(default_factory=list, description="Globs on task name or key; empty = all.")
    backend: str = Field("cuda", description="Kernel language asked for and verified: cuda, triton or cpu.")
    samples: int = Field(8, ge=1, description="Samples per task (the k of Pass@k).")
    turns: int = Field(3, ge=1, description="Most responses per sample (1 = single-turn).")
    keep_optimizing: bool = Field(False, description="Keep going after a passing turn (default: stop on a pass).")
    temperature: float = Field(0.7, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(16384, ge=1, description="New tokens per response.")
    seed: int = Field(0, description="Base of the per-request sampling seeds.")
    metadata: bool = Field(False, description="Put the reference's shape/stride/dtype metadata in the prompt.")
    few_shot: bool = Field(False, description="Put one worked example in the prompt.")
    overrides: dict[str, int | float | bool | str] = Field(default_factory=dict, description="--set size overrides.")
    workers: int = Field(1, ge=1, description="Parallel verifications.")
    verify: dict[str, Any] = Field(default_factory=dict, description="VerifyConfig fields (trials, timeout_s, …).")

    # Settings that change what a response or verdict means; a resumed run must keep them.
    FINGERPRINT: ClassVar[tuple[str, ...]] = ("model", "backend", "temperature", "top_p", "max_tokens", "seed",
                                              "metadata", "few_shot", "overrides", "verify")

    def fingerprint(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        return {k: data[k] for k in self.FINGERPRINT}

    def verify_config(self):
        from musacoder.config import VerifyConfig

        fields = dict(self.verify)
        # torch.compile faster-rate is a headline metric on GPUs; on CPU it is slow, so opt-in there; MUSA has no
        # torch.compile, so a musa run reports against eager only
        fields.setdefault("time_compile_baseline", self.backend not in ("cpu", "musa"))
        cfg = VerifyConfig(**fields)
        from musacoder.judge.devices import check_musa_config

        check_musa_config(self.backend, cfg.baseline, cfg.time_compile_baseline)
        return cfg
