// The engine-side serialisation of KV blocks (kv_payload.h) and window snapshots
// (window_snapshot.h) with the demo model: round trips rebuild states that continue exactly like
// the originals; sizes that do not match the model are FormatErrors.
#include <gtest/gtest.h>

#include "engine/runtime/chat_engine.h"
#include "engine/util/error.h"
#include "storage/kv_payload.h"
#include "storage/window_snapshot.h"

namespace flashdesk::storage {
namespace {

std::unique_ptr<ChatEngine> engine() {
  return ChatEngine::load(std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny",
                          EngineOptions{.threads = 2});
}

std::vector<int32_t> ids(int64_t n) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<int32_t>(100 + (i * 37) % 5000));
  return v;
}

TEST(KvPayload, BlocksRoundTripToTheSameGlobalKv) {
  auto e = engine();
  Model& m = e->model();
  SequenceState a = m.new_sequence();
  const auto prompt = ids(70);
  m.prefill(a, prompt, PrefillOptions{});
  // flash-tiny: sources 2, 4 (m = 2) and 6 (m = 1), rows of 72 + 68 bytes.
  EXPECT_EQ(kv_payload_bytes(a, 32), 16 * 140 + 16 * 140 + 32 * 140);
  std::vector<GlobalKvRows> rows;
  for (int64_t b = 0; b < 2; ++b)
    append_kv_payload(encode_kv_payload(m.backend(), a, b * 32, 32), a, 32, rows, "test");
  const auto original = read_prefix_rows(m.backend(), a, 64);
  for (size_t l = 0; l < rows.size(); ++l) {
    EXPECT_EQ(rows[l].n, original[l].n) << l;
    EXPECT_EQ(rows[l].entries, original[l].entries) << l;
    EXPECT_EQ(rows[l].index_keys, original[l].index_keys) << l;
  }
  SequenceState b = m.new_sequence();
  load_prefix(m.backend(), b, std::span<const int32_t>(prompt).first(64), rows);
  EXPECT_EQ(b.position(), 64);
  EXPECT_EQ(b.global[6].n_entries, 64);
  EXPECT_EQ(b.global[2].n_entries, 32);
}

TEST(KvPayload, APayloadOfAnotherSizeIsAFormatError) {
  auto e = engine();
  SequenceState a = e->model().new_sequence();
  e->model().prefill(a, ids(40), PrefillOptions{});
  std::vector<uint8_t> payload = encode_kv_payload(e->backend(), a, 0, 32);
  payload.pop_back();
  std::vector<GlobalKvRows> rows;
  try {
    append_kv_payload(payload, a, 32, rows, "KV block 00ff");
    FAIL() << "no error";
  } catch (const FormatError& err) {
    EXPECT_NE(std::string(err.what()).find("KV block 00ff"), std::string::npos) << err.what();
  }
  EXPECT_TRUE(rows.empty());
}

TEST(WindowSnapshot, RestoresAStateThatContinuesExactly) {
  auto e = engine();
  Model& m = e->model();
  const auto prompt = ids(45);  // odd: a pending compressor token at the m = 2 sources
  SequenceState a = m.new_sequence();
  m.prefill(a, prompt, PrefillOptions{});
  ASSERT_EQ(a.global[2].n_pending, 1);
  const auto snapshot = encode_window_snapshot(m.backend(), a, 32);
  SequenceState b = m.new_sequence();
  apply_window_snapshot(m.backend(), b, snapshot, prompt, 32, read_prefix_rows(m.backend(), a, 32));
  EXPECT_EQ(b.global[2].n_pending, 1);
  EXPECT_EQ(m.decode(a, 7), m.decode(b, 7));
  EXPECT_EQ(m.decode(a, 9), m.decode(b, 9));

  SequenceState c = m.new_sequence();
  const std::vector<uint8_t> cut(snapshot.begin(), snapshot.end() - 5);
  EXPECT_THROW(
      apply_window_snapshot(m.backend(), c, cut, prompt, 32, read_prefix_rows(m.backend(), a, 32)),
      FormatError);
  SequenceState d = m.new_sequence();
  EXPECT_THROW(
      apply_window_snapshot(m.backend(), d, snapshot, std::span<const int32_t>(prompt).first(44),
                            32, read_prefix_rows(m.backend(), a, 32)),
      FormatError);
}

}  // namespace
}  // namespace flashdesk::storage
