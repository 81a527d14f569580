// Generated from musacoder.port.mapping (render_shim_files); do not edit by hand.
// Stands in for MUSA's torch_musa/csrc/aten/musa/Exceptions.h: the CUDA header it was ported from, then the name shim.
#pragma once
#include <ATen/cuda/Exceptions.h>
#include <musa_to_cuda.h>
