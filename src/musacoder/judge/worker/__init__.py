"""The candidate worker: the only process that imports and runs candidate code.

Started by `musacoder.judge.sandbox` (forked by `musacoder.judge.forkserver`, or as `python -m musacoder.judge.worker
FD_IN FD_OUT`) in its own process group, in a throw-away working directory, with a scrubbed environment. It never
receives reference outputs: it gets inputs, returns the candidate's outputs (and the inputs as they are after the
call), the aten ops the profiler saw and the kernel launches the build/launch hooks counted. Timers are captured before
any candidate code is imported.

By concern:

- `rpc`: the request loop and its op table (`HANDLERS`: op → handler of its `musacoder.judge.messages` record);
- `setup`: the worker's own set-up, the same on every path it is started by, before any candidate code;
- `guard`: the harness guard, what the candidate may not change (global state, the dispatcher, the allocators, the
  environment, the functions the harness runs), read before its code and compared after;
- `triton_hook`: Triton's launches counted and checked, its compiled kernels read for clock reads;
- `load`: `load` (hooks, the task, the candidate's import and builds) and the builder's `build`;
- `calls`: `init`, `trial`, `resend`, `ipc_probe`, over `core.Worker.forward`, the one candidate call;
- `timing_ops`: `time` and the reference-only worker's timing requests (the timing method is `musacoder.judge.timing`);
- `errors`: whose fault an error is (`runtime_error` for the candidate's own code, `infra_error` for the harness's).
"""

from musacoder.judge.worker.core import Worker, all_threads
from musacoder.judge.worker.errors import CandidateError, is_oom, trim_tb
from musacoder.judge.worker.guard import input_mutation, scheduling
from musacoder.judge.worker.rpc import HANDLERS, main
from musacoder.judge.worker.setup import HARNESS_MODULES, drop_writable_import_paths
from musacoder.judge.worker.timing_ops import RotatingInputs
from musacoder.judge.worker.triton_hook import refuse_tensor_constexprs

# the names these had when the worker was one module (tests and the fork server reach them)
_drop_writable_import_paths = drop_writable_import_paths
_trim_tb, _is_oom, _all_threads = trim_tb, is_oom, all_threads
_RotatingInputs, _refuse_tensor_constexprs = RotatingInputs, refuse_tensor_constexprs

__all__ = ["HANDLERS", "HARNESS_MODULES", "CandidateError", "RotatingInputs", "Worker", "all_threads",
           "drop_writable_import_paths", "input_mutation", "is_oom", "main", "refuse_tensor_constexprs", "scheduling",
           "trim_tb"]
