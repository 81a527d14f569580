#pragma once
// musacoder's light stand-in for <ATen/cuda/CUDAContext.h> (first build attempt only; see torch/extension.h here):
// streams, device queries and error checks, without the cuBLAS/cuSPARSE/cuSOLVER handles the real header brings.
#include <cuda_runtime_api.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>

namespace at {
namespace cuda {
using c10::cuda::CUDAGuard;
using c10::cuda::CUDAStream;
using c10::cuda::CUDAStreamGuard;
using c10::cuda::OptionalCUDAGuard;
using c10::cuda::OptionalCUDAStreamGuard;
using c10::cuda::current_device;
using c10::cuda::device_count;
using c10::cuda::getCurrentCUDAStream;
using c10::cuda::getDefaultCUDAStream;
using c10::cuda::getStreamFromExternal;
cudaDeviceProp* getCurrentDeviceProperties();
cudaDeviceProp* getDeviceProperties(c10::DeviceIndex device);
int warp_size();
}  // namespace cuda
}  // namespace at
