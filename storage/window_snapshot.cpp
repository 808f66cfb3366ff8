// Encoding a sequence's window rings and global-KV tail for the DRAM window pool, and back.
#include "storage/window_snapshot.h"

#include <cstring>

#include "engine/util/error.h"

namespace flashdesk::storage {
namespace {

constexpr const char* kWhere = "window snapshot";

class Writer {
 public:
  void i64(int64_t v) { bytes(&v, sizeof v); }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  void tensor(Backend& backend, const Tensor& t, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n > 0) backend.read(t, out.data() + at, n);
  }
  std::vector<uint8_t> out;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  const uint8_t* take(size_t n) {
    if (n > in_.size() - at_) throw FormatError(kWhere, "truncated at byte " + std::to_string(at_));
    const uint8_t* p = in_.data() + at_;
    at_ += n;
    return p;
  }
  int64_t i64() {
    int64_t v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  void done() const {
    if (at_ != in_.size()) throw FormatError(kWhere, "trailing bytes at " + std::to_string(at_));
  }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 0;
};

bool is_source(const GlobalKv& g) {
  return g.ratio > 0 && g.entries.defined();
}

}  // namespace

std::vector<uint8_t> encode_window_snapshot(Backend& backend, const SequenceState& state,
                                            int64_t base) {
  FD_CHECK(base >= 0 && base <= state.position(), "window snapshot base out of range");
  Writer w;
  w.i64(state.position());
  w.i64(base);
  for (const WindowRing& ring : state.rings) {
    w.tensor(backend, ring.rows, ring.rows.nbytes());
    w.bytes(ring.positions.data(), ring.positions.size() * sizeof(int64_t));
  }
  for (const GlobalKv& g : state.global) {
    if (!is_source(g)) continue;
    FD_CHECK(base % g.ratio == 0, "window snapshot base must be a multiple of every ratio");
    const GlobalKvRows tail =
        read_global_kv(backend, g, base / g.ratio, g.n_entries - base / g.ratio);
    w.i64(tail.n);
    w.bytes(tail.entries.data(), tail.entries.size());
    w.bytes(tail.index_keys.data(), tail.index_keys.size());
    w.i64(g.n_pending);
    w.tensor(backend, g.pending_kv, g.pending_kv.nbytes());
    w.tensor(backend, g.pending_score, g.pending_score.nbytes());
  }
  return std::move(w.out);
}

void apply_window_snapshot(Backend& backend, SequenceState& fresh, std::span<const uint8_t> bytes,
                           std::span<const int32_t> prefix, int64_t base,
                           const std::vector<GlobalKvRows>& rows_below_base) {
  FD_CHECK(fresh.position() == 0 && rows_below_base.size() == fresh.global.size(),
           "apply_window_snapshot needs a fresh state and one row set per layer");
  Reader r(bytes);
  if (r.i64() != static_cast<int64_t>(prefix.size()) || r.i64() != base)
    throw FormatError(kWhere, "token count or base differs from the planned prefix");
  for (WindowRing& ring : fresh.rings) {
    backend.write(ring.rows, r.take(ring.rows.nbytes()), ring.rows.nbytes());
    std::memcpy(ring.positions.data(), r.take(ring.positions.size() * sizeof(int64_t)),
                ring.positions.size() * sizeof(int64_t));
  }
  for (size_t l = 0; l < fresh.global.size(); ++l) {
    GlobalKv& g = fresh.global[l];
    if (!is_source(g)) continue;
    GlobalKvRows rows = rows_below_base[l];
    if (rows.n != base / g.ratio) throw FormatError(kWhere, "rows below the base are missing");
    const int64_t n = r.i64();
    if (n < 0 || n > static_cast<int64_t>(prefix.size())) throw FormatError(kWhere, "bad tail");
    const auto eb = static_cast<size_t>(n * g.entries.dim(1));
    const auto kb = static_cast<size_t>(n * g.index_keys.dim(1));
    const uint8_t* e = r.take(eb);
    rows.entries.insert(rows.entries.end(), e, e + eb);
    const uint8_t* k = r.take(kb);
    rows.index_keys.insert(rows.index_keys.end(), k, k + kb);
    rows.n += n;
    restore_global_kv(backend, g, rows);
    g.n_pending = r.i64();
    if (g.n_pending < 0 || g.n_pending >= g.ratio) throw FormatError(kWhere, "bad pending count");
    backend.write(g.pending_kv, r.take(g.pending_kv.nbytes()), g.pending_kv.nbytes());
    backend.write(g.pending_score, r.take(g.pending_score.nbytes()), g.pending_score.nbytes());
  }
  r.done();
  fresh.tokens.assign(prefix.begin(), prefix.end());
  fresh.dead.assign(prefix.size(), 0);
}

}  // namespace flashdesk::storage
