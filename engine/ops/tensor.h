// Tensors of the backend interface: a typed, shaped view of memory owned by one backend (host
// memory for CPU backends, device memory for CUDA), shared by reference counting.
//
// Goals: one handle type for activations, caches and weights that the model code passes to
// backend ops without knowing where the bytes live. Non-goals: strides, broadcasting, autograd —
// every tensor is dense row-major, and ops check the shapes they need.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "engine/util/dtype.h"
#include "engine/util/error.h"

namespace flashdesk {

// One allocation of a backend. CPU backends return host addresses; a device backend returns a
// device address and says host_accessible() == false, so host code cannot dereference it.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual uint8_t* address() = 0;
  virtual size_t bytes() const = 0;
  virtual bool host_accessible() const = 0;
};

// Up to four dimensions, row-major, dim 0 outermost.
class Shape {
 public:
  static constexpr int kMaxRank = 4;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t numel() const;
  // Product of all dims but the first: the elements of one row.
  int64_t row_numel() const;
  bool operator==(const Shape& other) const;
  std::string str() const;  // "[2, 4, 128]"
  Shape with_dim0(int64_t rows) const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Memory> memory, size_t byte_offset, DType dtype, Shape shape);

  bool defined() const { return memory_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t rows() const { return shape_[0]; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool host_accessible() const { return memory_ && memory_->host_accessible(); }

  // Rows [first, first + count) along dim 0, sharing the memory.
  Tensor rows(int64_t first, int64_t count) const;
  // The same elements under another shape with the same element count.
  Tensor reshaped(Shape shape) const;

  // Host pointers; the dtype must match T's size class (checked), the memory must be host memory.
  template <class T>
  T* data() const {
    FD_CHECK(host_accessible(), "tensor memory is not host-accessible");
    FD_CHECK(sizeof(T) == dtype_size(dtype_), "tensor element size mismatch");
    return reinterpret_cast<T*>(memory_->address() + offset_);
  }
  uint8_t* bytes() const;  // device or host address of the first element
  const std::shared_ptr<Memory>& memory() const { return memory_; }
  size_t byte_offset() const { return offset_; }

 private:
  std::shared_ptr<Memory> memory_;
  size_t offset_ = 0;
  DType dtype_ = DType::F32;
  Shape shape_;
};

// Shape assertions used by every backend: name the op and the tensor in the message.
void check_shape(const Tensor& t, const Shape& expected, const char* what);
void check_dtype(const Tensor& t, DType expected, const char* what);

}  // namespace flashdesk
