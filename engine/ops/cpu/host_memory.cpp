// Host memory of the CPU reference backend: aligned allocations, row copies and weight uploads
// (zero-copy views of the memory-mapped checkpoint).
#include <cstring>
#include <new>
#include <thread>

#include "engine/ops/cpu/cpu_backend.h"
#include "engine/util/numeric.h"

namespace flashdesk {
namespace {

constexpr std::align_val_t kAlign{64};

class HostMemory final : public Memory {
 public:
  explicit HostMemory(size_t bytes)
      : bytes_(bytes), data_(static_cast<uint8_t*>(::operator new(bytes ? bytes : 1, kAlign))) {}
  ~HostMemory() override { ::operator delete(data_, kAlign); }
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  uint8_t* address() override { return data_; }
  size_t bytes() const override { return bytes_; }
  bool host_accessible() const override { return true; }

 private:
  size_t bytes_;
  uint8_t* data_;
};

// Bytes owned by someone else (the mapped checkpoint), read only by convention: weights are
// never written by any op.
class ExternalMemory final : public Memory {
 public:
  ExternalMemory(const uint8_t* data, size_t bytes) : data_(data), bytes_(bytes) {}
  uint8_t* address() override { return const_cast<uint8_t*>(data_); }
  size_t bytes() const override { return bytes_; }
  bool host_accessible() const override { return true; }

 private:
  const uint8_t* data_;
  size_t bytes_;
};

Shape shape_of(const TensorView& t) {
  FD_CHECK(t.shape.size() <= static_cast<size_t>(Shape::kMaxRank),
           std::string(t.name) + ": more than 4 dimensions");
  Shape s;
  switch (t.shape.size()) {
    case 0:
      s = Shape{1};
      break;
    case 1:
      s = Shape{t.dim(0)};
      break;
    case 2:
      s = Shape{t.dim(0), t.dim(1)};
      break;
    case 3:
      s = Shape{t.dim(0), t.dim(1), t.dim(2)};
      break;
    default:
      s = Shape{t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
      break;
  }
  return s;
}

size_t row_bytes(const Tensor& t) {
  return static_cast<size_t>(t.shape().row_numel()) * dtype_size(t.dtype());
}

}  // namespace

CpuReferenceBackend::CpuReferenceBackend(int threads)
    : pool_(std::make_unique<ThreadPool>(
          threads > 0 ? threads
                      : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())))) {}

Tensor CpuReferenceBackend::alloc(DType dtype, Shape shape) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  return Tensor(std::make_shared<HostMemory>(bytes), 0, dtype, shape);
}

void CpuReferenceBackend::fill_zero(Tensor& t) {
  std::memset(t.bytes(), 0, t.nbytes());
}

void CpuReferenceBackend::write(Tensor& dst, const void* src, size_t bytes) {
  FD_CHECK(bytes == dst.nbytes(), "write: byte count mismatch");
  std::memcpy(dst.bytes(), src, bytes);
}

void CpuReferenceBackend::read(const Tensor& src, void* dst, size_t bytes) {
  FD_CHECK(bytes == src.nbytes(), "read: byte count mismatch");
  std::memcpy(dst, src.bytes(), bytes);
}

void CpuReferenceBackend::copy(const Tensor& src, Tensor& dst) {
  FD_CHECK(src.nbytes() == dst.nbytes(), "copy: byte count mismatch");
  std::memmove(dst.bytes(), src.bytes(), src.nbytes());
}

void CpuReferenceBackend::gather_rows(const Tensor& src, std::span<const int64_t> rows,
                                      Tensor& dst) {
  const size_t rb = row_bytes(src);
  FD_CHECK(row_bytes(dst) == rb && dst.rows() == static_cast<int64_t>(rows.size()),
           "gather_rows: shape mismatch");
  for (size_t i = 0; i < rows.size(); ++i) {
    FD_CHECK(rows[i] >= 0 && rows[i] < src.rows(), "gather_rows: row out of range");
    std::memcpy(dst.bytes() + i * rb, src.bytes() + static_cast<size_t>(rows[i]) * rb, rb);
  }
}

void CpuReferenceBackend::scatter_rows(const Tensor& src, std::span<const int64_t> src_rows,
                                       Tensor& dst, std::span<const int64_t> dst_rows) {
  const size_t rb = row_bytes(src);
  FD_CHECK(row_bytes(dst) == rb && src_rows.size() == dst_rows.size(),
           "scatter_rows: shape mismatch");
  for (size_t i = 0; i < src_rows.size(); ++i) {
    FD_CHECK(src_rows[i] >= 0 && src_rows[i] < src.rows() && dst_rows[i] >= 0 &&
                 dst_rows[i] < dst.rows(),
             "scatter_rows: row out of range");
    std::memcpy(dst.bytes() + static_cast<size_t>(dst_rows[i]) * rb,
                src.bytes() + static_cast<size_t>(src_rows[i]) * rb, rb);
  }
}

Tensor mapped_host_tensor(const TensorView& t) {
  FD_CHECK(t.nbytes == static_cast<size_t>(t.numel()) * dtype_size(t.dtype),
           std::string(t.name) + ": byte size does not match its shape");
  return Tensor(std::make_shared<ExternalMemory>(t.data, t.nbytes), 0, t.dtype, shape_of(t));
}

Tensor CpuReferenceBackend::upload(const TensorView& t) {
  return mapped_host_tensor(t);
}

Tensor CpuReferenceBackend::upload_f32(const TensorView& t) {
  Tensor out = alloc(DType::F32, shape_of(t));
  float* o = out.data<float>();
  const int64_t n = t.numel();
  if (t.dtype == DType::F32) {
    std::memcpy(o, t.data, static_cast<size_t>(n) * 4);
  } else {
    FD_CHECK(t.dtype == DType::BF16, std::string(t.name) + ": expected BF16 or F32");
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      o[i] = bf16_to_f32(h);
    }
  }
  return out;
}

}  // namespace flashdesk
