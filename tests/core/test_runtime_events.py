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


def test_ops_on_another_thread_are_attributed_to_it():
    fwd = SimpleNamespace(**vars(_ev("musacoder::candidate_forward", "CPU")), thread=1)
    on_caller = SimpleNamespace(**vars(_ev("aten::empty", "CPU", parent=fwd)), thread=1)
    elsewhere = SimpleNamespace(**vars(_ev("aten::relu", "CPU")), thread=7)
    rep = analyse_events([fwd, on_caller, elsewhere])
    assert rep.illegal_ops == ["aten::relu (called on another thread by the candidate's native code (an OpenMP region "
                               "or a thread it started))"]
    assert rep.python_op_counts == {"aten::empty": 1}


def test_the_worker_s_profiler_sees_an_op_on_another_thread():
    """The profiler as the worker runs it (all threads, where torch has the option) records an op that another
    thread runs inside the forward; with per-thread callbacks it would be missed."""
    import threading

    import pytest
    import torch

    from musacoder.judge.worker import all_threads
    from musacoder.legality.runtime import FORWARD_RANGE

    config = all_threads(torch)
    if config is None:
        pytest.skip("this torch has no all-threads profiler option")
    x = torch.randn(64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], experimental_config=config) as prof:
        with torch.profiler.record_function(FORWARD_RANGE):
            t = threading.Thread(target=lambda: torch.relu(x))
            t.start()
            t.join()
    rep = analyse_events(prof.events())
    assert any(op.startswith("aten::relu (called on another thread") for op in rep.illegal_ops), rep.illegal_ops


def test_own_kernels_are_matched_by_their_function_name():
    from musacoder.legality.runtime import own_kernels

    kernels = [
        "relu_kernel(float const*, float*, long)",
        "void softmax_kernel<256>(float const*, float*, int)",
        "(anonymous namespace)::scan_kernel(float const*, float*, int)",
        "cand::gemm_tile(float const*, float const*, float*, int)",
        "extern_c_kernel",
        "add_kernel_0d1d2de",  # Triton's specialisation suffix
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
        "(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
        "ampere_sgemm_128x64_tn",
    ]
    assert own_kernels(kernels, ["relu_kernel"]) == [kernels[0]]
    assert own_kernels(kernels, ["softmax_kernel", "scan_kernel", "gemm_tile"]) == kernels[1:4]
    assert own_kernels(kernels, ["extern_c_kernel", "add_kernel"]) == kernels[4:6]
    # a one-letter kernel name is not found inside another kernel's name, nor is a name borrowed from ATen's
    assert own_kernels(kernels, ["k", "e", "a"]) == []
    assert own_kernels(kernels, ["vectorized_elementwise_kernel"]) == []
    assert own_kernels(kernels, ["sgemm"]) == []


def test_a_thread_pinned_to_fewer_cores_changes_the_worker_s_global_state():
    """The worker compares its threads' CPU sets and scheduling before and after candidate code: a thread pinned to
    one core (the reference's pool, say) shows as a new CPU set."""
    import os
    import threading

    import pytest

    from musacoder.judge.worker.guard import scheduling

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    before = scheduling()
    pinned, done = threading.Event(), threading.Event()

    def pin():
        os.sched_setaffinity(threading.get_native_id(), {cpus[0]})
        pinned.set()
        done.wait(10)

    t = threading.Thread(target=pin)
    t.start()
    pinned.wait(10)
    try:
        during = scheduling()
    finally:
        done.set()
        t.join()
    assert before["thread CPU sets"] == [tuple(cpus)]
    assert (cpus[0],) in during["thread CPU sets"] and during != before


def test_operators_outside_aten_are_judged_too():
    """oneDNN's fused linear (`mkldnn::_linear_pointwise`) records no aten compute op: an operator of any namespace
    is judged, and none outside aten is plumbing. Ranges, runtime calls and kernels are not operators; an operator
    nested in another is judged through the outermost."""
    fwd = _ev("musacoder::candidate_forward", "CPU")
    fused = _ev("mkldnn::_linear_pointwise", "CPU", parent=fwd)
    rep = analyse_events([fwd, fused, _ev("aten::empty", "CPU", parent=fused), _ev("mkl::_mkl_linear", "CPU", parent=fwd),
                          _ev("cudaLaunchKernel", "CPU", parent=fwd), _ev("void k<float>(float*)", "CPU", parent=fwd),
                          _ev("musacoder::ext::relu_fwd", "CPU", parent=fwd)])
    assert rep.illegal_ops == ["mkldnn::_linear_pointwise (called from Python in forward)",
                               "mkl::_mkl_linear (called from Python in forward)"]
    inside = _ev("aten::linear", "CPU", parent=fwd)
    rep = analyse_events([fwd, inside, _ev("mkldnn::_linear_pointwise", "CPU", parent=inside)])
    assert rep.illegal_ops == ["aten::linear (called from Python in forward)"]


def test_the_profiler_records_a_fused_onednn_linear_as_an_operator_outside_aten():
    import pytest
    import torch

    from musacoder.legality.runtime import FORWARD_RANGE

    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        pytest.skip("this torch has no oneDNN fused linear")
    x, w, b = torch.randn(4, 8), torch.randn(16, 8), torch.randn(16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.profiler.record_function(FORWARD_RANGE):
            torch.ops.mkldnn._linear_pointwise(x, w, b, "gelu", [], "tanh")
    rep = analyse_events(prof.events())
    assert any(op.startswith("mkldnn::_linear_pointwise") for op in rep.illegal_ops), rep.illegal_ops


def test_a_tensor_passed_as_a_triton_constexpr_is_refused():
    """Under Triton's interpreter a tensor given as a `tl.constexpr` reaches the kernel's body as a host tensor (the
    Triton round: `Y.copy_(X.clamp(min=0))` there); a GPU build never accepts one, so the worker refuses it too."""
    import pytest
    import torch

    from musacoder.judge.worker import refuse_tensor_constexprs

    def kernel(x_ptr, n, X: "tl.constexpr", BLOCK: "tl.constexpr"):
        pass

    x = torch.zeros(4)
    refuse_tensor_constexprs(torch, kernel, "kernel", (x, 4, 3), {"BLOCK": 128})  # scalars: fine
    with pytest.raises(TypeError, match="tensor was passed as the tl.constexpr X"):
        refuse_tensor_constexprs(torch, kernel, "kernel", (x, 4, x), {"BLOCK": 128})
    with pytest.raises(TypeError, match="tl.constexpr BLOCK"):
        refuse_tensor_constexprs(torch, kernel, "kernel", (x, 4), {"X": 1, "BLOCK": x})
