// A small host-side tensor (shape + bytes) used to hand intermediate values to observers and to
// take block-input overrides from them.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "engine/util/dtype.h"
#include "engine/util/error.h"

namespace flashdesk {

struct HostTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;

  static HostTensor zeros(DType dtype, std::vector<int64_t> shape) {
    HostTensor t{dtype, std::move(shape), {}};
    t.bytes.assign(static_cast<size_t>(t.numel()) * dtype_size(dtype), 0);
    return t;
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  template <class T>
  std::span<T> as() {
    FD_CHECK(sizeof(T) == dtype_size(dtype), "host tensor element size");
    return {reinterpret_cast<T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
  template <class T>
  std::span<const T> as() const {
    FD_CHECK(sizeof(T) == dtype_size(dtype), "host tensor element size");
    return {reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T)};
  }
};

}  // namespace flashdesk
