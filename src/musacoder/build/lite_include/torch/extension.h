#pragma once
// musacoder's light stand-in for <torch/extension.h>, used for a first, fast build attempt only.
//
// The real header pulls in torch/all.h (nn, optim, jit, data, serialize ...) for every translation unit, which is
// most of a load_inline build. Kernel wrappers need tensors, their options, the allocation factories and checks:
// this header gives exactly that, through the same dispatcher entry points (at::_ops::*::call) the real inline
// factories use, so every allocation is still a visible aten op. A source that needs anything else fails to
// compile with it and is rebuilt exactly as written (see musacoder/build/cache.py).
#include <optional>
#include <vector>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_ops.h>
#include <ATen/ops/empty_like_ops.h>
#include <ATen/ops/empty_strided_ops.h>
#include <ATen/ops/zeros_ops.h>
#include <ATen/ops/zeros_like_ops.h>
#include <ATen/ops/ones_ops.h>
#include <ATen/ops/ones_like_ops.h>
#include <ATen/ops/full_ops.h>
#include <ATen/ops/full_like_ops.h>
#include <c10/core/SymIntArrayRef.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/Exception.h>
#include <ATen/DeviceGuard.h>
#ifdef __CUDACC__
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace at {
#define MUSACODER_OPTS(o) c10::optTypeMetaToScalarType(o.dtype_opt()), o.layout_opt(), o.device_opt(), o.pinned_memory_opt()
inline Tensor empty(IntArrayRef size, TensorOptions options = {}, std::optional<MemoryFormat> memory_format = std::nullopt) {
  return _ops::empty_memory_format::call(c10::fromIntArrayRefSlow(size), MUSACODER_OPTS(options),
      c10::impl::check_tensor_options_and_extract_memory_format(options, memory_format));
}
inline Tensor empty_like(const Tensor& self, TensorOptions options = {}, std::optional<MemoryFormat> memory_format = std::nullopt) {
  return _ops::empty_like::call(self, MUSACODER_OPTS(options),
      c10::impl::check_tensor_options_and_extract_memory_format(options, memory_format));
}
inline Tensor empty_strided(IntArrayRef size, IntArrayRef stride, TensorOptions options = {}) {
  return _ops::empty_strided::call(c10::fromIntArrayRefSlow(size), c10::fromIntArrayRefSlow(stride), MUSACODER_OPTS(options));
}
inline Tensor zeros(IntArrayRef size, TensorOptions options = {}) {
  return _ops::zeros::call(c10::fromIntArrayRefSlow(size), MUSACODER_OPTS(options));
}
inline Tensor zeros_like(const Tensor& self, TensorOptions options = {}, std::optional<MemoryFormat> memory_format = std::nullopt) {
  return _ops::zeros_like::call(self, MUSACODER_OPTS(options),
      c10::impl::check_tensor_options_and_extract_memory_format(options, memory_format));
}
inline Tensor ones(IntArrayRef size, TensorOptions options = {}) {
  return _ops::ones::call(c10::fromIntArrayRefSlow(size), MUSACODER_OPTS(options));
}
inline Tensor ones_like(const Tensor& self, TensorOptions options = {}, std::optional<MemoryFormat> memory_format = std::nullopt) {
  return _ops::ones_like::call(self, MUSACODER_OPTS(options),
      c10::impl::check_tensor_options_and_extract_memory_format(options, memory_format));
}
inline Tensor full(IntArrayRef size, const Scalar& fill_value, TensorOptions options = {}) {
  return _ops::full::call(c10::fromIntArrayRefSlow(size), fill_value, MUSACODER_OPTS(options));
}
inline Tensor full_like(const Tensor& self, const Scalar& fill_value, TensorOptions options = {},
                        std::optional<MemoryFormat> memory_format = std::nullopt) {
  return _ops::full_like::call(self, fill_value, MUSACODER_OPTS(options),
      c10::impl::check_tensor_options_and_extract_memory_format(options, memory_format));
}
#undef MUSACODER_OPTS
}  // namespace at

namespace torch {
using namespace at;  // NOLINT: torch::Tensor, torch::empty ... as in torch/types.h
using std::nullopt;  // NOLINT
using std::optional;  // NOLINT
using Dtype = at::ScalarType;
constexpr auto kUInt8 = at::kByte;
constexpr auto kInt8 = at::kChar;
constexpr auto kInt16 = at::kShort;
constexpr auto kInt32 = at::kInt;
constexpr auto kInt64 = at::kLong;
constexpr auto kFloat16 = at::kHalf;
constexpr auto kFloat32 = at::kFloat;
constexpr auto kFloat64 = at::kDouble;
constexpr auto kU8 = kUInt8;
constexpr auto kI8 = kInt8;
constexpr auto kI16 = kInt16;
constexpr auto kI32 = kInt32;
constexpr auto kI64 = kInt64;
constexpr auto kF16 = kFloat16;
constexpr auto kF32 = kFloat32;
constexpr auto kF64 = kFloat64;
}  // namespace torch
