"""MooreEval's stages, one module each, in the order `musacoder.judge.pipeline` runs them: `extract` (code out of
the response, static legality), `build` (the candidate imported and built in its worker), `binary` (the built
libraries' imports and machine code), `correctness` (trials, the precision rule, extra shapes), `runtime` (runtime
legality), `timing` (timed rounds, re-check, clean reference), `reward` (status, reward, feedback). `context` holds
what they share (`RunContext`, `Stop`), `rpc` the calls into the candidate's worker."""

from musacoder.judge.stages.context import RetryAlone, RunContext, Stop

__all__ = ["RetryAlone", "RunContext", "Stop"]
