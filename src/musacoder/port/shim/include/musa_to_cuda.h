// Generated from musacoder.port.mapping (render_shim_header); do not edit by hand.
// Maps the MUSA names the port writes back to CUDA so ported sources compile with nvcc.
#pragma once
#include <cuda_runtime.h>
#include <ATen/core/TensorBase.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

// torch_musa keeps streams/guards in c10::musa and context helpers in at::musa.
namespace c10 { namespace musa = ::c10::cuda; }
namespace at { namespace musa = ::at::cuda; }

#define getCurrentMUSAStream getCurrentCUDAStream
#define getDefaultMUSAStream getDefaultCUDAStream
#define MUSAStream CUDAStream
#define OptionalMUSAGuard OptionalCUDAGuard
#define MUSAGuard CUDAGuard
#define MUSAStreamGuard CUDAStreamGuard
#define getCurrentMUSABlasHandle getCurrentCUDABlasHandle
#define kPrivateUse1 kCUDA
#define C10_MUSA_KERNEL_LAUNCH_CHECK C10_CUDA_KERNEL_LAUNCH_CHECK
#define C10_MUSA_CHECK C10_CUDA_CHECK
#define AT_MUSA_CHECK AT_CUDA_CHECK
#if defined(__CUDA_ARCH__) && !defined(__MUSA_ARCH__)
#define __MUSA_ARCH__ __CUDA_ARCH__
#endif
#if defined(__CUDACC__) && !defined(__MUSACC__)
#define __MUSACC__ __CUDACC__
#endif
#if defined(CUDART_VERSION) && !defined(MUSART_VERSION)
#define MUSART_VERSION CUDART_VERSION
#endif
#define musaError_t cudaError_t
#define musaSuccess cudaSuccess
#define musaErrorInvalidValue cudaErrorInvalidValue
#define musaGetLastError cudaGetLastError
#define musaPeekAtLastError cudaPeekAtLastError
#define musaGetErrorString cudaGetErrorString
#define musaDeviceProp cudaDeviceProp
#define musaGetDeviceProperties cudaGetDeviceProperties
#define musaGetDevice cudaGetDevice
#define musaSetDevice cudaSetDevice
#define musaDeviceSynchronize cudaDeviceSynchronize
#define musaDeviceGetAttribute cudaDeviceGetAttribute
#define musaDevAttrMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define musaDevAttrMultiProcessorCount cudaDevAttrMultiProcessorCount
#define musaFuncSetAttribute cudaFuncSetAttribute
#define musaFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define musaOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define musaLaunchKernel cudaLaunchKernel
#define musaMalloc cudaMalloc
#define musaFree cudaFree
#define musaMallocAsync cudaMallocAsync
#define musaFreeAsync cudaFreeAsync
#define musaMemcpy cudaMemcpy
#define musaMemcpyAsync cudaMemcpyAsync
#define musaMemset cudaMemset
#define musaMemsetAsync cudaMemsetAsync
#define musaMemGetInfo cudaMemGetInfo
#define musaMemcpyHostToDevice cudaMemcpyHostToDevice
#define musaMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define musaMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define musaStream_t cudaStream_t
#define musaStreamCreate cudaStreamCreate
#define musaStreamDestroy cudaStreamDestroy
#define musaStreamSynchronize cudaStreamSynchronize
#define musaStreamDefault cudaStreamDefault
#define musaEvent_t cudaEvent_t
#define musaEventCreate cudaEventCreate
#define musaEventRecord cudaEventRecord
#define musaEventSynchronize cudaEventSynchronize
#define musaEventElapsedTime cudaEventElapsedTime
#define musaEventDestroy cudaEventDestroy
#define musaDataType cudaDataType
#define MUSA_R_32F CUDA_R_32F
#define __mt_bfloat16 __nv_bfloat16
#define mt_bfloat16 nv_bfloat16
#define mublasHandle_t cublasHandle_t
#define mublasStatus_t cublasStatus_t
#define mublasCreate cublasCreate
#define mublasDestroy cublasDestroy
#define mublasSetStream cublasSetStream
#define mublasSgemm cublasSgemm
#define mublasSgemmStridedBatched cublasSgemmStridedBatched
#define mublasGemmEx cublasGemmEx
#define MUBLAS_OP_N CUBLAS_OP_N
#define MUBLAS_OP_T CUBLAS_OP_T
#define MUBLAS_STATUS_SUCCESS CUBLAS_STATUS_SUCCESS
#define MUBLAS_COMPUTE_32F CUBLAS_COMPUTE_32F
#define is_privateuseone is_cuda
