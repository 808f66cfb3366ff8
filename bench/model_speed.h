// What the model benchmarks share: the weight bytes one decoded token reads (the roofline's
// numerator), the host's memcpy bandwidth, and random prompts of ordinary token ids.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_timing.h"
#include "engine/checkpoint/checkpoint.h"

namespace flashdesk::bench {

// Bytes of checkpoint tensors one decoded token reads: dense tensors whole, routed experts
// top-k of n, one embedding row, the gathered Engram rows; the vision tower not at all.
inline double weight_bytes_per_token(const Checkpoint& ckpt) {
  const auto& t = ckpt.config().text;
  const double expert_share =
      static_cast<double>(t.num_experts_per_tok) / static_cast<double>(t.n_routed_experts);
  const double engram_rows = static_cast<double>((t.engram_max_ngram_size - 1) * t.engram_n_heads);
  double total = 0;
  for (const std::string& name : ckpt.tensor_names()) {
    const TensorSpec v = ckpt.tensor_spec(name);
    const double bytes = static_cast<double>(v.nbytes());
    if (name.rfind("vision", 0) == 0 || name.rfind("aligner", 0) == 0 ||
        name.find("image_") != std::string::npos)
      continue;
    if (name.find(".experts.") != std::string::npos && name.find("shared") == std::string::npos)
      total += bytes * expert_share;
    else if (name.rfind("embed.", 0) == 0)
      total += bytes / static_cast<double>(v.shape[0]);
    else if (name.find("engram.embed.") != std::string::npos)
      total += bytes / static_cast<double>(v.shape[0]) * engram_rows;
    else
      total += bytes;
  }
  return total;
}

// memcpy bandwidth with every core (read + write traffic), on buffers far larger than the caches.
inline double memcpy_bandwidth(int threads) {
  const size_t per_thread = size_t{64} << 20;
  std::vector<std::vector<char>> src(threads), dst(threads);
  for (int i = 0; i < threads; ++i) {
    src[i].assign(per_thread, static_cast<char>(i + 1));
    dst[i].assign(per_thread, 0);
  }
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i)
      pool.emplace_back([&, i] { std::memcpy(dst[i].data(), src[i].data(), per_thread); });
    for (auto& th : pool) th.join();
    runs.push_back(2.0 * static_cast<double>(per_thread) * threads / seconds_since(t0));
  }
  return median(runs);
}

inline std::vector<int32_t> random_prompt(int64_t n, int64_t vocab, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  // Ordinary token ids only (the demo vocabulary ends in special tokens).
  for (auto& id : ids) id = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 64));
  return ids;
}

}  // namespace flashdesk::bench
