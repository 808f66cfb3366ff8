// Shape arithmetic and row views of backend tensors.
#include "engine/ops/tensor.h"

#include <utility>

namespace flashdesk {

Shape::Shape(std::initializer_list<int64_t> dims) {
  FD_CHECK(dims.size() <= kMaxRank, "tensors have at most 4 dimensions");
  for (int64_t d : dims) {
    FD_CHECK(d >= 0, "negative tensor dimension");
    dims_[static_cast<size_t>(rank_++)] = d;
  }
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

int64_t Shape::row_numel() const {
  int64_t n = 1;
  for (int i = 1; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] != other.dims_[static_cast<size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[static_cast<size_t>(i)]);
  }
  return s + "]";
}

Shape Shape::with_dim0(int64_t rows) const {
  Shape s = *this;
  FD_CHECK(rank_ >= 1, "scalar has no rows");
  s.dims_[0] = rows;
  return s;
}

Tensor::Tensor(std::shared_ptr<Memory> memory, size_t byte_offset, DType dtype, Shape shape)
    : memory_(std::move(memory)), offset_(byte_offset), dtype_(dtype), shape_(shape) {
  FD_CHECK(memory_ != nullptr, "tensor without memory");
  FD_CHECK(offset_ + nbytes() <= memory_->bytes(),
           "tensor " + shape_.str() + " exceeds its allocation");
}

Tensor Tensor::rows(int64_t first, int64_t count) const {
  FD_CHECK(shape_.rank() >= 1, "row view of a scalar");
  FD_CHECK(
      first >= 0 && count >= 0 && first + count <= shape_[0],
      "rows [" + std::to_string(first) + ", +" + std::to_string(count) + ") of " + shape_.str());
  const size_t row_bytes = static_cast<size_t>(shape_.row_numel()) * dtype_size(dtype_);
  return Tensor(memory_, offset_ + static_cast<size_t>(first) * row_bytes, dtype_,
                shape_.with_dim0(count));
}

Tensor Tensor::reshaped(Shape shape) const {
  FD_CHECK(shape.numel() == numel(), "reshape " + shape_.str() + " to " + shape.str());
  return Tensor(memory_, offset_, dtype_, shape);
}

uint8_t* Tensor::bytes() const {
  FD_CHECK(defined(), "undefined tensor");
  return memory_->address() + offset_;
}

void check_shape(const Tensor& t, const Shape& expected, const char* what) {
  FD_CHECK(t.defined(), std::string(what) + ": tensor is undefined");
  FD_CHECK(t.shape() == expected,
           std::string(what) + ": shape " + t.shape().str() + ", expected " + expected.str());
}

void check_dtype(const Tensor& t, DType expected, const char* what) {
  FD_CHECK(t.defined(), std::string(what) + ": tensor is undefined");
  FD_CHECK(t.dtype() == expected, std::string(what) + ": dtype " +
                                      std::string(dtype_name(t.dtype())) + ", expected " +
                                      std::string(dtype_name(expected)));
}

}  // namespace flashdesk
