// Images in stored sessions, end to end with the demo model (assets/models/flash-tiny has a vision
// tower), real SQLite files, real PNG files and real block files: an image turn stores its
// attachment once per digest, a restart restores the image-bearing prefix from the SSD (the replay
// re-encodes the image) and another picture behind the same placeholder tokens reuses nothing
// past the blocks before it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include "engine/runtime/chat_engine.h"
#include "engine/util/error.h"
#include "persistent_chat_test_util.h"
#include "storage/kv_payload.h"
#include "storage/persistent_chat.h"
#include "storage/prefix_planner.h"
#include "storage_test_util.h"

namespace flashdesk::storage {
namespace {

namespace fs = std::filesystem;
using testing::answer_ids;
using testing::chat_options;
using testing::kBlock;
using testing::kDemoModel;
using testing::load_engine;
using testing::long_text;
using testing::TempDir;
using testing::turn_options;

const fs::path kSource(FD_SOURCE_DIR);
const fs::path kImages = kSource / "assets/eval/demo/images";

std::vector<uint8_t> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A user's picture: a copy of a demo image in `dir` (the test may delete it later).
fs::path user_image(const TempDir& dir, const std::string& demo_name) {
  const fs::path copy = dir.path() / ("user-" + demo_name);
  fs::copy_file(kImages / demo_name, copy);
  return copy;
}

int64_t files_under(const fs::path& dir) {
  int64_t n = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

// The rows of the first `tokens` tokens of `rows` (taken from a state of the same model).
std::vector<GlobalKvRows> first_rows(std::vector<GlobalKvRows> rows, const SequenceState& shape,
                                     int64_t tokens) {
  for (size_t l = 0; l < rows.size(); ++l) {
    const GlobalKv& g = shape.global[l];
    if (g.ratio <= 0) continue;
    const int64_t n = tokens / g.ratio;
    rows[l].n = n;
    rows[l].entries.resize(static_cast<size_t>(n * g.entries.dim(1)));
    rows[l].index_keys.resize(static_cast<size_t>(n * g.index_keys.dim(1)));
  }
  return rows;
}

TEST(SessionImages, RestartRestoresTheImagePrefixFromSsdAndReplaysTheImage) {
  TempDir dir, user_files;
  const fs::path picture = user_image(user_files, "image-0.png");
  const std::vector<uint8_t> picture_bytes = file_bytes(picture);
  const TurnOptions t = turn_options(PrefillMode::Bounded);
  int64_t session = 0;
  std::vector<TokenId> live_tokens;
  std::vector<GlobalKvRows> live_rows;  // the first process's global KV
  ImageSpan span;
  {
    auto engine = load_engine();
    PersistentChat chat(*engine, chat_options(dir));
    session = chat.create_session("picture", chat.settings_for(t, "Be brief."));
    chat.send(long_text(30), t);  // several windows of text, then the image near the end
    const SessionTurn turn =
        chat.send("What is in this picture? " + long_text(2), std::vector{picture}, t);
    EXPECT_GT(turn.turn.generation.stats.reused_ram_tokens, 0);
    ASSERT_EQ(turn.image_spans.size(), 1u);
    span = turn.image_spans[0];
    EXPECT_EQ(span.digest, image_digest(picture_bytes));
    EXPECT_EQ(span.length, 22);  // image-0.png: a 4x4 grid, (4 + 1) * 4 + 2 placeholders
    const auto image_id = static_cast<TokenId>(engine->config().image_token_id);
    for (int64_t i = span.begin; i < span.begin + span.length; ++i)
      ASSERT_EQ(turn.turn.prompt_ids[static_cast<size_t>(i)], image_id);
    chat.flush();
    live_tokens = chat.live_state()->tokens;
    live_rows = read_prefix_rows(engine->backend(), *chat.live_state(),
                                 chat.live_tokens() / kBlock * kBlock);
  }
  fs::remove(picture);  // the user's file is gone: the session keeps its own copy

  auto engine = load_engine();
  PersistentChat chat(*engine, chat_options(dir));
  chat.open_session(session);
  const std::vector<Message> stored = chat.messages();
  ASSERT_EQ(stored.size(), 4u);
  ASSERT_EQ(stored[2].attachments.size(), 1u);
  const Attachment& a = stored[2].attachments[0];
  EXPECT_EQ(a.digest, span.digest);
  EXPECT_EQ(a.mime_type, "image/png");
  EXPECT_EQ(a.byte_size, static_cast<int64_t>(picture_bytes.size()));
  EXPECT_EQ(file_bytes(a.path), picture_bytes);

  const SessionTurn turn = chat.send("Tell me more.", t);
  const GenerationStats& s = turn.turn.generation.stats;
  const auto P = static_cast<int64_t>(turn.turn.prompt_ids.size());
  const int64_t W = engine->config().text.sliding_window;
  const int64_t C =
      std::min<int64_t>(static_cast<int64_t>(live_tokens.size()), P - 1) / kBlock * kBlock;
  ASSERT_EQ(turn.image_spans.size(), 1u);
  EXPECT_EQ(turn.image_spans[0].digest, span.digest);
  EXPECT_EQ(turn.image_spans[0].begin, span.begin);
  // The whole image-bearing conversation comes from the SSD; only the new turn is computed, and
  // the image lies in the replayed tail, so the replay needs its embeddings.
  EXPECT_EQ(s.reused_ssd_tokens, C);
  ASSERT_GE(C, span.begin + span.length);
  ASSERT_LT(C - W, span.begin);
  EXPECT_EQ(s.reused_ram_tokens, 0);
  EXPECT_EQ(s.reused_pool_tokens, 0);
  EXPECT_EQ(s.replayed_tokens, W);
  EXPECT_EQ(s.computed_tokens, P - C);
  EXPECT_EQ(turn.corrupt_blocks, 0);
  // The restored state marks the image tokens as the first process's prefill did.
  for (int64_t i = 0; i < C; ++i) {
    const bool in_image = i >= span.begin && i < span.begin + span.length;
    ASSERT_EQ(chat.live_state()->dead[static_cast<size_t>(i)], in_image ? 1 : 0) << "token " << i;
  }

  // The reference: the first process's rows restored from RAM, the image tokens marked by their
  // id, the replay run with the image embedded (bounded replay's promise: the SSD adds nothing).
  const ImageRef image = engine->prepare_image(kImages / "image-0.png");
  const std::vector<flashdesk::ImageSpan> spans{{static_cast<size_t>(span.begin),
                                                 static_cast<size_t>(span.begin + span.length),
                                                 image->pixels.grid}};
  const std::vector<ImageRef> images{image};
  const auto tail =
      std::span<const TokenId>(turn.turn.prompt_ids).subspan(static_cast<size_t>(C - W));
  auto restored_reference = [&] {
    SequenceState ref = engine->model().new_sequence();
    load_prefix(engine->backend(), ref,
                std::span<const TokenId>(turn.turn.prompt_ids).first(static_cast<size_t>(C)),
                first_rows(live_rows, ref, C));
    return ref;
  };
  SequenceState ref = restored_reference();
  const auto image_id = static_cast<TokenId>(engine->config().image_token_id);
  for (int64_t i = 0; i < C; ++i)
    ref.dead[static_cast<size_t>(i)] = ref.tokens[static_cast<size_t>(i)] == image_id;
  const std::vector<ImageEmbedding> embedded =
      engine->embed_images(spans, images, static_cast<size_t>(C - W));
  ASSERT_EQ(embedded.size(), 1u);
  GenerationOptions g = t.generation;
  g.prefill.replay = W;
  g.prefill.images = embedded;
  EXPECT_EQ(answer_ids(turn.turn.generation),
            answer_ids(engine->generator().generate(ref, tail, g, {})));

  // The embeddings matter: a replay that runs the placeholders as text gives other logits.
  PrefillOptions with{.mode = PrefillMode::Bounded, .replay = W, .images = embedded};
  PrefillOptions without{.mode = PrefillMode::Bounded, .replay = W};
  SequenceState a_state = restored_reference(), b_state = restored_reference();
  for (int64_t i = 0; i < C; ++i)
    a_state.dead[static_cast<size_t>(i)] = a_state.tokens[static_cast<size_t>(i)] == image_id;
  const std::vector<float> la = engine->model().prefill(a_state, tail, with);
  const std::vector<float> lb = engine->model().prefill(b_state, tail, without);
  double diff = 0;
  for (size_t i = 0; i < la.size(); ++i)
    diff = std::max(diff, static_cast<double>(std::abs(la[i] - lb[i])));
  EXPECT_GT(diff, 1e-3);
}

TEST(SessionImages, PoolRestoreOfAnImagePrefixMatchesAFreshEngineRun) {
  TempDir dir, user_files;
  const fs::path picture = user_image(user_files, "image-0.png");
  auto engine = load_engine();
  PersistentChat chat(*engine, chat_options(dir));
  const TurnOptions t = turn_options(PrefillMode::Exact, 6);
  const std::string question = "How many shapes are there? " + long_text(3);
  const int64_t a = chat.create_session("a", chat.settings_for(t));
  const SessionTurn first = chat.send(question, std::vector{picture}, t);
  const std::vector<TokenId> a_tokens = chat.live_state()->tokens;
  chat.flush();
  chat.create_session("b", chat.settings_for(t));  // parks a's window
  chat.send("Something else.", t);
  chat.open_session(a);
  const SessionTurn turn = chat.send("And the colours?", t);
  const GenerationStats& s = turn.turn.generation.stats;
  const auto T = static_cast<int64_t>(a_tokens.size());
  EXPECT_EQ(s.reused_ssd_tokens, T / kBlock * kBlock);
  EXPECT_GT(s.reused_ssd_tokens, first.image_spans.at(0).begin + first.image_spans[0].length);
  EXPECT_EQ(s.reused_pool_tokens, T - T / kBlock * kBlock);
  EXPECT_EQ(s.replayed_tokens, 0);
  EXPECT_EQ(s.computed_tokens, static_cast<int64_t>(turn.turn.prompt_ids.size()) - T);

  // The same conversation through the engine alone, no storage: the same prompt and answer.
  ChatSession fresh(*engine);
  const std::vector<ImageRef> images{engine->prepare_image(kImages / "image-0.png")};
  const TurnResult f1 = fresh.send(user_turn(question, images), t, {});
  EXPECT_EQ(f1.prompt_ids, first.turn.prompt_ids);
  EXPECT_EQ(answer_ids(f1.generation), answer_ids(first.turn.generation));
  const TurnResult f2 = fresh.send(user_turn("And the colours?"), t, {});
  EXPECT_EQ(f2.prompt_ids, turn.turn.prompt_ids);
  EXPECT_EQ(answer_ids(f2.generation), answer_ids(turn.turn.generation));
}

TEST(SessionImages, ADifferentImageReusesOnlyTheBlocksBeforeIt) {
  TempDir dir, user_files;
  const fs::path red = user_image(user_files, "image-0.png");
  const fs::path blue = user_image(user_files, "image-1.png");
  const TurnOptions t = turn_options(PrefillMode::Bounded, 3);
  const std::string system = "Answer about the picture. " + long_text(14);  // > W tokens before it
  SessionTurn first;
  {
    auto engine = load_engine();
    PersistentChat chat(*engine, chat_options(dir));
    chat.create_session("red", chat.settings_for(t, system));
    first = chat.send("What is this?", std::vector{red}, t);
    chat.flush();
  }
  auto engine = load_engine();
  const int64_t W = engine->config().text.sliding_window;
  const ImageSpan& span = first.image_spans.at(0);
  const int64_t before = span.begin / kBlock * kBlock;  // the blocks of text before the image
  ASSERT_GT(before, W);
  PersistentChat chat(*engine, chat_options(dir));

  chat.create_session("blue", chat.settings_for(t, system));
  const SessionTurn other = chat.send("What is this?", std::vector{blue}, t);
  ASSERT_EQ(other.turn.prompt_ids, first.turn.prompt_ids);  // the same tokens...
  ASSERT_NE(other.image_spans.at(0).digest, span.digest);   // ...behind another picture
  EXPECT_EQ(other.turn.generation.stats.reused_ssd_tokens, before);
  EXPECT_EQ(other.turn.generation.stats.computed_tokens,
            static_cast<int64_t>(other.turn.prompt_ids.size()) - before);

  chat.create_session("red again", chat.settings_for(t, system));
  const SessionTurn same = chat.send("What is this?", std::vector{red}, t);
  EXPECT_GT(same.turn.generation.stats.reused_ssd_tokens, span.begin);  // the image's blocks
  // Two pictures, three messages: each file is stored once.
  EXPECT_EQ(files_under(dir.layout().attachments_dir()), 2);
}

TEST(SessionImages, LiveKvIsNotReusedPastAReplacedImage) {
  // An edited first message (the same text and grid, another picture) must not extend the live
  // KV through the old image: the state is cut back to before the image.
  TempDir dir, user_files;
  const fs::path red = user_image(user_files, "image-0.png");
  const fs::path blue = user_image(user_files, "image-1.png");
  auto engine = load_engine();
  PersistentChatOptions o = chat_options(dir);
  o.use_ssd = false;  // live KV only
  o.use_window_pool = false;
  PersistentChat chat(*engine, o);
  const TurnOptions t = turn_options(PrefillMode::Bounded, 3);
  const int64_t sid = chat.create_session("edit", chat.settings_for(t, long_text(14)));
  const SessionTurn first = chat.send("What is this?", std::vector{red}, t);
  const ImageSpan span = first.image_spans.at(0);
  ASSERT_GT(span.begin, engine->config().text.sliding_window);
  chat.store().delete_messages_from(sid, 0);
  const SessionTurn edited = chat.send("What is this?", std::vector{blue}, t);
  ASSERT_EQ(edited.turn.prompt_ids, first.turn.prompt_ids);
  EXPECT_EQ(edited.turn.generation.stats.reused_ram_tokens, span.begin);  // cut at the image
  chat.store().delete_messages_from(sid, 0);
  const SessionTurn back = chat.send("What is this?", std::vector{red}, t);
  EXPECT_EQ(back.turn.generation.stats.reused_ram_tokens,
            span.begin);  // the live state holds blue now
}

// The stored type follows the file's bytes, not its name; TGA (no signature) goes by the name.
TEST(SessionImages, MimeTypesFollowTheBytes) {
  const fs::path data = fs::path(FD_SOURCE_DIR) / "tests/data/vision";
  const auto mime = [&](const char* name, const char* as) {
    std::ifstream in(data / name, std::ios::binary);
    const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), {}};
    return image_mime_type(bytes, as);
  };
  EXPECT_EQ(mime("tiny.webp", "photo.png"), "image/webp");
  EXPECT_EQ(mime("tiny.png", "photo.webp"), "image/png");
  EXPECT_EQ(mime("oriented-6.jpg", "x"), "image/jpeg");
  EXPECT_EQ(mime("tiny.gif", "x"), "image/gif");
  EXPECT_EQ(mime("tiny.bmp", "x"), "image/bmp");
  EXPECT_EQ(mime("tiny.tga", "tiny.TGA"), "image/x-tga");
}

TEST(SessionImages, BadImageFilesLeaveTheSessionUnchanged) {
  TempDir dir;
  auto engine = load_engine();
  PersistentChat chat(*engine, chat_options(dir));
  const TurnOptions t = turn_options(PrefillMode::Bounded, 2);
  chat.create_session("bad", chat.settings_for(t));
  EXPECT_THROW(chat.send("x", std::vector{kDemoModel / "config.json"}, t), FormatError);
  EXPECT_THROW(chat.send("x", std::vector{dir.path() / "no-such.png"}, t), IoError);
  EXPECT_TRUE(chat.messages().empty());
  EXPECT_EQ(files_under(dir.layout().attachments_dir()), 0);
}

}  // namespace
}  // namespace flashdesk::storage
