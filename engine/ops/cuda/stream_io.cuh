// The residual streams' elements as the kernels read and write them (Backend::stream_dtype): F32,
// or BF16 bits (uint16_t), which is how the reference stores X between sublayers
// (MODEL-REFERENCE §4.1) and half the bytes: an 8K-token prefill moves X [8192, 4, 5120] through
// memory six times a layer (two mixes, two sublayer boundaries reading and writing it). Every
// value a stream holds is a BF16 value (each writer rounds it), so both storages give the same
// results to the bit; a store into BF16 rounds to nearest even.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "engine/ops/cuda/bf16_codes.cuh"
#include "engine/ops/cuda/device_numeric.cuh"
#include "engine/ops/tensor.h"
#include "engine/util/error.h"

namespace flashdesk::cuda {

// Four BF16 values, two to a word (the first in the low half), as floats.
__device__ __forceinline__ float4 widen_bf16x4(uint32_t lo, uint32_t hi) {
  return float4{__uint_as_float(lo << 16), __uint_as_float(lo & 0xFFFF0000u),
                __uint_as_float(hi << 16), __uint_as_float(hi & 0xFFFF0000u)};
}

// Four consecutive elements (p 16-byte aligned for F32, 8-byte for BF16).
__device__ __forceinline__ float4 load_stream4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ __forceinline__ float4 load_stream4(const uint16_t* p) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
  return widen_bf16x4(w.x, w.y);
}
__device__ __forceinline__ void store_stream4(float* p, float4 v) {
  *reinterpret_cast<float4*>(p) = v;
}
__device__ __forceinline__ void store_stream4(uint16_t* p, float4 v) {
  *reinterpret_cast<uint2*>(p) = uint2{bf16x2_rn(v.x, v.y), bf16x2_rn(v.z, v.w)};
}

// One element.
__device__ __forceinline__ float load_stream(const float* p) {
  return *p;
}
__device__ __forceinline__ float load_stream(const uint16_t* p) {
  return bf16_bits_to_f32(*p);
}
__device__ __forceinline__ void store_stream(float* p, float v) {
  *p = v;
}
__device__ __forceinline__ void store_stream(uint16_t* p, float v) {
  *p = f32_to_bf16_bits(v);
}

// Calls f with a null pointer of the element type X is stored in (float or uint16_t): the host
// side's dispatch to a kernel's two instantiations.
template <class F>
void with_stream_type(const Tensor& X, const char* op, F&& f) {
  if (X.dtype() == DType::F32)
    f(static_cast<float*>(nullptr));
  else if (X.dtype() == DType::BF16)
    f(static_cast<uint16_t*>(nullptr));
  else
    FD_CHECK(false, std::string(op) + ": the streams must be F32 or BF16");
}
template <class P>
using StreamOf = std::remove_pointer_t<P>;

}  // namespace flashdesk::cuda
