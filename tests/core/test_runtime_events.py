"""Runtime legality read from profiler events: GPU user-annotation ranges are not kernels."""

from types import SimpleNamespace

from musacoder.legality.runtime import analyse_events


def _ev(name, device, us=0.0, annotation=False, parent=None):
    return SimpleNamespace(name=name, device_type=f"DeviceType.{device}", is_user_annotation=annotation,
                           time_range=SimpleNamespace(elapsed_us=lambda: us), cpu_parent=parent)


def test_user_annotation_on_the_gpu_timeline_is_neither_a_kernel_nor_device_time():
    fwd = _ev("musacoder::candidate_forward", "CPU")
    events = [
        fwd,
        _ev("aten::empty", "CPU", parent=fwd),
        _ev("gemm_kernel", "CUDA", us=4800.0),
        # record_function ranges are mirrored on the GPU timeline and span the kernels inside them
        _ev("musacoder::candidate_forward", "CUDA", us=4810.0, annotation=True),
        _ev("gemm_kernel", "CUDA", us=200.0),
    ]
    rep = analyse_events(events)
    assert rep.device_kernels == ["gemm_kernel", "gemm_kernel"]
    assert abs(rep.device_time_ms - 5.0) < 1e-9
    assert rep.illegal_ops == []


def test_aten_compute_under_the_forward_is_illegal():
    fwd = _ev("musacoder::candidate_forward", "CPU")
    rep = analyse_events([fwd, _ev("aten::mm", "CPU", parent=fwd), _ev("sm90_xmma_gemm", "CUDA", us=10.0)])
    assert rep.illegal_ops == ["aten::mm (called from Python in forward)"]
    assert rep.device_kernels == ["sm90_xmma_gemm"]
