// Generated from musacoder.port.mapping (render_shim_files); do not edit by hand.
// Stands in for MUSA's mublas.h: the CUDA header it was ported from, then the name shim.
#pragma once
#include <cublas_v2.h>
#include <musa_to_cuda.h>
