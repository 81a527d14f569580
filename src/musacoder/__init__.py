"""musacoder: train and evaluate LLMs that write native GPU kernels (MusaCoder).

`verify` runs MooreEval on one candidate and returns a `Verdict`.
"""

from musacoder.config import VerifyConfig
from musacoder.records import Candidate, Task, Verdict

__all__ = ["verify", "Verdict", "Task", "Candidate", "VerifyConfig"]
__version__ = "0.1.0"


def verify(task, candidate, backend=None, overrides=None, config=None) -> Verdict:
    """Verify one candidate against one task; see `musacoder.judge.pipeline.verify`."""
    from musacoder.judge.pipeline import verify as _verify

    return _verify(task, candidate, backend=backend, overrides=overrides, config=config)
