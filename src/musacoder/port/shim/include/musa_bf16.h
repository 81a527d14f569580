// Generated from musacoder.port.mapping (render_shim_files); do not edit by hand.
// Stands in for MUSA's musa_bf16.h: the CUDA header it was ported from, then the name shim.
#pragma once
#include <cuda_bf16.h>
#include <musa_to_cuda.h>
