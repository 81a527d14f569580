"""The correctness requests: `init` (the candidate's model and the worker's reference copy), `trial` (one profiled
call on inputs made here), `resend` (the last outputs again) and `ipc_probe` (a known pattern over CUDA IPC, before
any candidate code)."""

from __future__ import annotations

import time

from musacoder.judge import messages
from musacoder.judge.worker.errors import CandidateError, candidate_error


def handle_init(worker, req: messages.InitRequest) -> dict:
    """Make ModelNew (candidate code) and the worker's reference copy (harness), both with the reference's
    weights. Only what ModelNew's constructor and its `.to()` raise is the candidate's error."""
    torch = worker.torch
    if req.device:
        worker.set_device(req.device)
    worker.release_memory = bool(req.release_memory)
    init_inputs = list(req.init_inputs)
    if worker.candidate is None:
        worker.ref_model = _reference(worker, init_inputs, req.state_dict, req.seed)
        return {"ok": True, "notes": []}
    torch.manual_seed(req.seed)
    try:
        model = worker.candidate.ModelNew(*init_inputs)
        notes = _load_weights(torch, model, req.state_dict)
        worker.model = model.to(worker.device)
        worker.sync()
    except BaseException as e:  # noqa: BLE001 - the candidate's constructor
        return candidate_error(e, "ModelNew.__init__")
    if worker.task_module is not None and req.build_reference:
        worker.ref_model = _reference(worker, init_inputs, req.state_dict, req.seed)
    return {"ok": True, "notes": notes, "device_mem_peak": worker.device_mem_peak()}


def _load_weights(torch, model, ref_sd: dict) -> list[str]:
    """Copy the reference's weights into the candidate's model where names and shapes match; a note for each that
    does not."""
    notes = []
    own = model.state_dict()
    with torch.no_grad():
        for k, v in ref_sd.items():
            if k in own and own[k].shape == v.shape:
                own[k].copy_(v)
            elif k in own:
                notes.append(f"{k}: shape {tuple(own[k].shape)} differs from the reference's {tuple(v.shape)}")
            else:
                notes.append(f"{k}: not kept as a parameter/buffer of ModelNew (weights may differ)")
    return notes


def _reference(worker, init_inputs, state_dict, seed: int):
    """The reference with the trusted side's weights, on the worker's device. Where the state dict holds every tensor
    of the model, it is made on the meta device and filled from the state dict on the device (`_from_state`), not
    initialised on the host first: the same model, without seconds of host work for a large one's random init."""
    ref = _from_state(worker.torch, worker.task_module.Model, init_inputs, state_dict, worker.device)
    if ref is not None:
        return ref
    worker.torch.manual_seed(seed)
    ref = worker.task_module.Model(*init_inputs)
    ref.load_state_dict(state_dict)
    return ref.to(worker.device)


def _from_state(torch, model_cls, init_inputs, state_dict: dict, device: str):
    """`model_cls(*init_inputs)` made on the meta device, its storage allocated on `device` and filled from
    `state_dict`; None wherever that could differ from making it on the host and loading the state dict (the
    constructor fails on meta tensors, a tensor of the model is not a parameter or buffer the state dict holds, such
    as a non-persistent buffer or a plain tensor attribute)."""
    try:
        with torch.device("meta"):
            model = model_cls(*init_inputs)
    except Exception:  # noqa: BLE001 - a constructor that needs real values
        return None
    if not isinstance(model, torch.nn.Module):
        return None
    held = [n for n, _ in model.named_parameters(remove_duplicate=False)] + \
        [n for n, _ in model.named_buffers(remove_duplicate=False)]
    if sorted(held) != sorted(state_dict) or any(_holds_tensor(torch, m) for m in model.modules()):
        return None
    # `to_empty` would allocate through the meta tensors' Python refs, whose first use imports seconds of sympy
    model._apply(lambda t: torch.empty_strided(tuple(t.size()), tuple(t.stride()), dtype=t.dtype, device=device))
    model.load_state_dict(state_dict)
    return model


def _holds_tensor(torch, module, depth: int = 3) -> bool:
    """Whether a module keeps a tensor outside its parameters and buffers (in an attribute, a list, a dict)."""
    def has(x, d: int) -> bool:
        if isinstance(x, torch.Tensor):
            return True
        if d <= 0:
            return False
        if isinstance(x, (list, tuple, set)):
            return any(has(y, d - 1) for y in x)
        if isinstance(x, dict):
            return any(has(y, d - 1) for y in x.values())
        return False

    return any(has(x, depth) for k, x in vars(module).items() if k not in ("_parameters", "_buffers", "_modules"))


def handle_trial(worker, req: messages.TrialRequest) -> dict:
    """One candidate call on inputs made here from the trial's seed, the allocator poisoned first."""
    from musacoder.judge.inputs import make_inputs

    t0 = time.perf_counter()
    inputs = make_inputs(worker.task_module, req.seed, perturb=req.perturb, device=worker.device)
    t1 = time.perf_counter()
    worker.poison_allocator(inputs)
    t2 = time.perf_counter()
    try:
        out, report = worker.forward(inputs, profile=req.profile, seed=req.seed, perturb=req.perturb,
                                     expect=req.expect, dispatcher_check=req.dispatcher_check)
    except CandidateError as e:
        return candidate_error(e.error, "forward")
    del inputs
    t3 = time.perf_counter()
    outputs = worker.outputs_reply(out, req.ipc)
    report.setdefault("harness_s", {}).update(inputs=t1 - t0, poison=t2 - t1, reply=time.perf_counter() - t3)
    return {"ok": True, "outputs": outputs, "report": report}


def handle_resend(worker, req: messages.ResendRequest) -> dict:
    """The last outputs again, through the pipe (the trusted side could not read their CUDA IPC exports)."""
    from musacoder.judge.inputs import to_device

    last = worker.last_outputs
    if isinstance(last, dict):  # take_outputs' rounds
        return {"ok": True, "outputs": {r: to_device(o, "cpu") for r, o in last.items()}}
    return {"ok": True, "outputs": to_device(last, "cpu")}


def handle_ipc_probe(worker, req: messages.IpcProbeRequest) -> dict:
    """Export a known pattern on the verification's GPU (before any candidate code is imported)."""
    from musacoder.judge import ipc as cuda_ipc

    worker.device = req.device
    worker.torch.cuda.set_device(worker.torch.device(worker.device))
    return {"ok": True, "probe": cuda_ipc.probe_spec(worker.device, worker.exports)}
