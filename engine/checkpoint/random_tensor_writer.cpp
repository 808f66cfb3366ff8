// Row-chunk generation, quantisation and writing of random tensors.
#include "engine/checkpoint/random_tensor_writer.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/checkpoint/random_init.h"
#include "engine/util/error.h"
#include "engine/util/numeric.h"
#include "engine/util/quant.h"

namespace flashdesk {
namespace {

using Format = RandomTensorPlan::Format;

std::span<const uint8_t> as_bytes(const std::vector<uint8_t>& v) {
  return {v.data(), v.size()};
}

template <typename T>
std::span<const uint8_t> as_bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

// Rows [r0, r1) of the logical matrix as floats.
std::vector<float> draw_rows(const RandomTensorPlan& p, const InitRule& rule, uint64_t seed,
                             int64_t r0, int64_t r1) {
  std::vector<float> x(static_cast<size_t>((r1 - r0) * p.cols));
  for (int64_t r = r0; r < r1; ++r)
    random_row(seed, p.weight->name, r, rule, x.data() + (r - r0) * p.cols, p.cols);
  return x;
}

void write_plain(const RandomTensorPlan& p, const std::vector<float>& x, int64_t r0,
                 TensorSink& w) {
  if (p.weight->dtype == DType::F32) {
    w.write(p.weight->name, as_bytes(x), static_cast<uint64_t>(r0 * p.cols) * 4);
    return;
  }
  FD_CHECK(p.weight->dtype == DType::BF16,
           "random plain tensors are BF16 or F32: " + p.weight->name);
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_bf16(x[i]);
  w.write(p.weight->name, as_bytes(h), static_cast<uint64_t>(r0 * p.cols) * 2);
}

// 32 x 32 tiles, one UE8M0 scale each; r0 is a multiple of 32.
void write_fp8_tiles(const RandomTensorPlan& p, const std::vector<float>& x, int64_t r0, int64_t r1,
                     TensorSink& w) {
  const int64_t cols = p.cols, scale_cols = (cols + 31) / 32;
  const int64_t tile_rows = (r1 - r0 + 31) / 32;
  std::vector<uint8_t> codes(x.size()), scales(static_cast<size_t>(tile_rows * scale_cols));
  float tile[32 * 32];
  uint8_t tile_codes[32 * 32];
  for (int64_t tr = 0; tr < tile_rows; ++tr)
    for (int64_t tc = 0; tc < scale_cols; ++tc) {
      const int64_t rb = tr * 32, re = std::min(rb + 32, r1 - r0);
      const int64_t cb = tc * 32, ce = std::min(cb + 32, cols);
      const int64_t width = ce - cb;
      for (int64_t r = rb; r < re; ++r)
        std::copy_n(&x[r * cols + cb], width, tile + (r - rb) * width);
      scales[tr * scale_cols + tc] = quantize_block_fp8(tile, (re - rb) * width, tile_codes);
      for (int64_t r = rb; r < re; ++r)
        std::copy_n(tile_codes + (r - rb) * width, width, &codes[r * cols + cb]);
    }
  w.write(p.weight->name, as_bytes(codes), static_cast<uint64_t>(r0 * cols));
  w.write(p.scale->name, as_bytes(scales), static_cast<uint64_t>(r0 / 32 * scale_cols));
}

// Each row quantised in blocks of 32 columns: FP8 codes (Engram tables) or packed FP4 (experts).
void write_row_blocks(const RandomTensorPlan& p, const std::vector<float>& x, int64_t r0,
                      TensorSink& w) {
  const bool fp4 = p.format == Format::Fp4Rows;
  const int64_t blocks = p.cols / 32, bytes_per_block = fp4 ? 16 : 32;
  const int64_t n_blocks = static_cast<int64_t>(x.size()) / 32;
  std::vector<uint8_t> data(static_cast<size_t>(n_blocks * bytes_per_block));
  std::vector<uint8_t> scales(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) {
    const float* in = &x[b * 32];
    uint8_t* out = &data[b * bytes_per_block];
    scales[b] = fp4 ? quantize_block_fp4_e8m0(in, 32, out) : quantize_block_fp8(in, 32, out);
  }
  w.write(p.weight->name, as_bytes(data), static_cast<uint64_t>(r0 * blocks * bytes_per_block));
  w.write(p.scale->name, as_bytes(scales), static_cast<uint64_t>(r0 * blocks));
}

void generate_chunk(const RandomTensorPlan& p, const InitRule& rule, uint64_t seed, int64_t r0,
                    int64_t r1, TensorSink& w) {
  const std::vector<float> x = draw_rows(p, rule, seed, r0, r1);
  switch (p.format) {
    case Format::Plain:
      write_plain(p, x, r0, w);
      break;
    case Format::Fp8Tiles:
      write_fp8_tiles(p, x, r0, r1, w);
      break;
    case Format::Fp8Rows:
    case Format::Fp4Rows:
      write_row_blocks(p, x, r0, w);
      break;
  }
}

// The bytes of rows [r0, r1) written to two buffers that start at those rows.
class RowsSink final : public TensorSink {
 public:
  RowsSink(const RandomTensorPlan& p, int64_t r0, uint8_t* weight, uint8_t* scale)
      : p_(p), weight_(weight), scale_(scale) {
    weight_base_ = static_cast<uint64_t>(r0) * (p.weight->nbytes() / static_cast<uint64_t>(p.rows));
    if (p.scale) {
      const int64_t scale_row = p.format == Format::Fp8Tiles ? r0 / 32 : r0;
      scale_base_ = static_cast<uint64_t>(scale_row) *
                    (p.scale->nbytes() / static_cast<uint64_t>(p.scale->shape[0]));
    }
  }

  void write(std::string_view name, std::span<const uint8_t> bytes, uint64_t offset) override {
    const bool weight = name == p_.weight->name;
    FD_CHECK(weight || (p_.scale && name == p_.scale->name),
             "the generator wrote " + std::string(name) + ", not " + p_.weight->name);
    const uint64_t base = weight ? weight_base_ : scale_base_;
    FD_CHECK(offset >= base, "rows written before the first asked for: " + std::string(name));
    std::copy(bytes.begin(), bytes.end(), (weight ? weight_ : scale_) + (offset - base));
  }

 private:
  const RandomTensorPlan& p_;
  uint8_t* weight_;
  uint8_t* scale_;
  uint64_t weight_base_ = 0, scale_base_ = 0;
};

}  // namespace

void write_random_rows(const RandomTensorPlan& plan, const TextConfig& text, uint64_t seed,
                       int64_t r0, int64_t r1, uint8_t* weight, uint8_t* scale) {
  FD_CHECK(0 <= r0 && r0 < r1 && r1 <= plan.rows, plan.weight->name + ": rows out of range");
  FD_CHECK(plan.format != Format::Fp8Tiles || (r0 % 32 == 0 && (r1 % 32 == 0 || r1 == plan.rows)),
           plan.weight->name + ": FP8 tiles are written in whole 32-row groups");
  RowsSink sink(plan, r0, weight, scale);
  generate_chunk(plan, init_rule(plan.weight->name, plan.cols, text), seed, r0, r1, sink);
}

std::string random_format_name(Format format, DType dtype) {
  switch (format) {
    case Format::Fp8Tiles:
      return "fp8 32x32 tiles";
    case Format::Fp8Rows:
      return "fp8 rows (Engram)";
    case Format::Fp4Rows:
      return "fp4 rows (experts)";
    case Format::Plain:
      break;
  }
  return std::string(dtype_name(dtype));
}

std::vector<RandomTensorPlan> plan_random_tensors(const std::vector<TensorSpec>& specs) {
  std::unordered_map<std::string_view, const TensorSpec*> by_name;
  for (const TensorSpec& s : specs) by_name.emplace(s.name, &s);
  std::vector<RandomTensorPlan> plans;
  for (const TensorSpec& s : specs) {
    if (s.dtype == DType::F8_E8M0) continue;  // scales are derived with their weight
    RandomTensorPlan p;
    p.weight = &s;
    p.rows = s.shape.size() >= 2 ? s.numel() / s.shape.back() : 1;
    p.cols = s.shape.empty() ? 1 : s.shape.back();
    if (s.dtype == DType::F8_E4M3 || s.dtype == DType::I8) {
      std::string scale =
          s.name.substr(0, s.name.size() - std::string_view(".weight").size()) + ".scale";
      const auto it = by_name.find(scale);
      FD_CHECK(s.name.ends_with(".weight") && it != by_name.end(), "no scale for " + s.name);
      p.scale = it->second;
      if (s.dtype == DType::I8) {
        p.format = Format::Fp4Rows;
        p.cols *= 2;
      } else {
        p.format = p.scale->shape[0] == p.rows && p.rows > 1 ? Format::Fp8Rows : Format::Fp8Tiles;
      }
    }
    plans.push_back(p);
  }
  return plans;
}

void add_random_tensor_jobs(const RandomTensorPlan& plan, const TextConfig& text, uint64_t seed,
                            TensorSink& sink, int64_t elements_per_job,
                            std::vector<std::function<void()>>& jobs) {
  const InitRule rule = init_rule(plan.weight->name, plan.cols, text);
  int64_t rows_per_job = std::max<int64_t>(1, elements_per_job / std::max<int64_t>(plan.cols, 1));
  rows_per_job = (rows_per_job + 31) / 32 * 32;  // whole 32-row tiles
  for (int64_t r0 = 0; r0 < plan.rows; r0 += rows_per_job) {
    const int64_t r1 = std::min(plan.rows, r0 + rows_per_job);
    jobs.push_back(
        [plan, rule, seed, r0, r1, &sink] { generate_chunk(plan, rule, seed, r0, r1, sink); });
  }
}

void run_jobs(std::vector<std::function<void()>>& jobs, int threads) {
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < jobs.size();) {
      try {
        jobs[i]();
      } catch (...) {
        const std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        next = jobs.size();
      }
    }
  };
  std::vector<std::jthread> pool;
  const int useful = static_cast<int>(std::min<size_t>(std::max(threads, 1), jobs.size()));
  for (int t = 1; t < useful; ++t) pool.emplace_back(worker);
  worker();
  pool.clear();  // joins
  if (error) std::rethrow_exception(error);
}

}  // namespace flashdesk
