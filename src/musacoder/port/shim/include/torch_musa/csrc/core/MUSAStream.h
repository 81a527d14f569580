// Generated from musacoder.port.mapping (render_shim_files); do not edit by hand.
// Stands in for MUSA's torch_musa/csrc/core/MUSAStream.h: the CUDA header it was ported from, then the name shim.
#pragma once
#include <c10/cuda/CUDAStream.h>
#include <musa_to_cuda.h>
