"""Large outputs handed from the candidate's worker to the trusted process on the GPU itself (CUDA IPC).

Sending a 6.4 GB output through the worker's pipe costs a device-to-host copy, the pipe and a host-to-device copy
(about 20 s per trial at KernelBench's level-1 sizes). Instead, for an output tensor on a GPU of at least
`MIN_BYTES`, the worker sends an *export*: the CUDA IPC handle of the allocation that holds it, the byte offset and
size, dtype and shape (`export`, worker side; the worker keeps the tensor alive until its next request, then gives
it back, `release`). The trusted
process opens the handle, checks that [offset, offset + size) lies inside the allocation the handle names, copies
those bytes into its own memory and closes the handle at once (`open_copy`). The worker cannot make the trusted
process read outside the allocation it exported, run code, or keep a mapping alive; if it changes the bytes while they
are copied, it changes only its own output. A handle that cannot be opened after the probe succeeded is the
worker's doing (`IpcError`).

`probe_spec`/`probe_check`: before any candidate code exists in the worker, it exports a known pattern, which the
trusted side must read back, or the verification falls back to the pipe. The trusted side needs NVIDIA's
`cuda-bindings` package (`cuda.bindings`); without it, outputs travel through the pipe as before.
"""

from __future__ import annotations

import torch

MIN_BYTES = 64 << 20
EXPORT_KEY = "__musacoder_cuda_ipc__"
_DTYPES = {str(d).removeprefix("torch."): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16, torch.int8,
    torch.uint8, torch.bool, torch.complex64)}
PROBE_BYTES = 1 << 20


class IpcError(RuntimeError):
    """An export that cannot be opened or read as declared."""


def available() -> bool:
    """The trusted side can open CUDA IPC handles (a GPU and `cuda.bindings`)."""
    if not torch.cuda.is_available():
        return False
    try:
        from cuda.bindings import driver, runtime  # noqa: F401
    except ImportError:
        return False
    return True


# -- worker side ----------------------------------------------------------------------------------------------
def export(t: torch.Tensor, keep: list) -> dict:
    """The export of a CUDA tensor's bytes (contiguous: a copy on the same device when it is not); appends what must
    stay alive until the trusted side has copied it to `keep`."""
    c = t.detach().contiguous()
    info = c.untyped_storage()._share_cuda_()
    keep.append((c, info[4], int(info[5])))  # the tensor and torch's reference counter for this share
    handle, storage_offset = _ipc_handle(bytes(info[1])), int(info[3])
    return {EXPORT_KEY: {"handle": handle.hex(), "offset": storage_offset + c.storage_offset() * c.element_size(),
                         "nbytes": c.numel() * c.element_size(), "dtype": str(c.dtype).removeprefix("torch."),
                         "shape": list(c.shape), "device": c.device.index}}


def _ipc_handle(shared: bytes) -> bytes:
    """The 64-byte cudaIpcMemHandle inside the handle torch's caching allocator shares: recent torch prefixes it with
    a format version and a kind byte (`c`: a plain cudaMalloc segment, the only kind opened here)."""
    if len(shared) == 64:
        return shared
    if len(shared) == 66 and shared[1:2] == b"c":
        return shared[2:]
    raise IpcError(f"unsupported shared-handle format ({len(shared)} bytes, kind {shared[1:2]!r})")


def release(keep: list) -> None:
    """Forget the exports kept since the last request (the trusted side has copied them by now).

    `_share_cuda_` puts the storage behind torch's cross-process reference count, set to 1 for a consumer that never
    comes here: the trusted side opens the handle itself and closes it at once. Unreleased, every exported storage
    would wait in torch's IPC limbo when freed, never returned to the caching allocator, so a worker held every
    output it had sent (about 80 GB after ten 8 GB outputs). So the count is given back here for each export, the
    kept tensors are dropped and whatever already waits in the limbo is freed."""
    if not keep:
        return
    for _, counter, offset in keep:
        if counter:
            torch.UntypedStorage._release_ipc_counter_cuda(counter, offset)
    keep.clear()
    torch.cuda.ipc_collect()


def export_outputs(obj, keep: list):
    """`obj` with every plain CUDA tensor of at least `MIN_BYTES` replaced by its export."""
    if type(obj) is torch.Tensor and obj.is_cuda and obj.numel() * obj.element_size() >= MIN_BYTES:
        return export(obj, keep)
    if isinstance(obj, (list, tuple)):
        return type(obj)(export_outputs(x, keep) for x in obj)
    return obj


def probe_spec(device: str, keep: list) -> dict:
    """A known byte pattern on `device`, exported (sent before any candidate code is imported)."""
    pattern = torch.arange(PROBE_BYTES, dtype=torch.int64, device=device).remainder_(251).to(torch.uint8)
    return export(pattern, keep)


# -- trusted side ---------------------------------------------------------------------------------------------
class _Pointer:
    """A device byte range seen through `__cuda_array_interface__`, for `torch.as_tensor` (which accepts no
    read-only flag; the view is only ever cloned)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "strides": None,
                                         "version": 3}


def _check(result, what: str):
    err, *rest = result
    if int(err) != 0:
        raise IpcError(f"{what} failed: {err}")
    return rest[0] if len(rest) == 1 else rest


def open_copy(spec: dict, device: str) -> torch.Tensor:
    """Copy the bytes an export names into a fresh tensor of the trusted process on `device`. Raises `IpcError`
    when the export is malformed or names bytes outside its allocation; out-of-memory as torch raises it."""
    try:
        handle = bytes.fromhex(spec["handle"])
        offset, nbytes = int(spec["offset"]), int(spec["nbytes"])
        dtype = _DTYPES[spec["dtype"]]
        shape = [int(x) for x in spec["shape"]]
    except (KeyError, TypeError, ValueError) as e:
        raise IpcError(f"malformed output export ({e})") from None
    n = 1
    for x in shape:
        n *= x
    if len(handle) != 64 or offset < 0 or min(shape, default=1) < 0 or n * dtype.itemsize != nbytes:
        raise IpcError("output export does not describe its tensor consistently")
    from cuda.bindings import driver, runtime

    h = runtime.cudaIpcMemHandle_t()
    h.reserved = handle
    dev = torch.device(device)
    with torch.cuda.device(dev):
        base = _check(runtime.cudaIpcOpenMemHandle(h, runtime.cudaIpcMemLazyEnablePeerAccess), "opening the handle")
        try:
            start, size = _check(driver.cuMemGetAddressRange(int(base)), "reading the allocation's range")
            if int(start) != int(base) or offset + nbytes > int(size):
                raise IpcError(f"output export names bytes [{offset}, {offset + nbytes}) outside its allocation of "
                               f"{int(size)} bytes")
            try:
                raw = torch.as_tensor(_Pointer(int(base) + offset, nbytes), device=dev) if nbytes else \
                    torch.empty(0, dtype=torch.uint8, device=dev)
                out = raw.clone()
                torch.cuda.current_stream(dev).synchronize()  # this verification's stream, before the handle closes
                del raw
            except torch.OutOfMemoryError:
                raise
            except (RuntimeError, TypeError, ValueError) as e:
                raise IpcError(f"reading the export failed ({type(e).__name__}: {e})") from None
        finally:
            runtime.cudaIpcCloseMemHandle(base)
    return out.view(dtype).reshape(shape) if nbytes else torch.empty(shape, dtype=dtype, device=dev)


def import_outputs(obj, device: str):
    """`obj` with every export replaced by the trusted process's own copy of its tensor."""
    if type(obj) is dict and len(obj) == 1 and EXPORT_KEY in obj:
        spec = obj[EXPORT_KEY]
        if type(spec) is not dict:
            raise IpcError("malformed output export")
        return open_copy(spec, device)
    if type(obj) is dict:  # e.g. the kept outputs of a `time` request, by round
        return {k: import_outputs(x, device) for k, x in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(import_outputs(x, device) for x in obj)
    return obj


def probe_check(spec: dict, device: str) -> bool:
    """The probe export reads back as the pattern it was made from."""
    got = open_copy(spec[EXPORT_KEY], device)
    want = torch.arange(PROBE_BYTES, dtype=torch.int64, device=device).remainder_(251).to(torch.uint8)
    return bool(torch.equal(got, want))
