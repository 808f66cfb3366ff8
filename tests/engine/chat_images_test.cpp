// Image turns through the engine API (ChatEngine / ChatSession / DemoEval) on the demo model:
// prepared images, the span in the rendered prompt, KV reuse with an image in the live prefix,
// and the errors a caller sees for bad files or mismatched parts.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "engine/runtime/chat_engine.h"
#include "engine/runtime/demo_eval.h"
#include "engine/util/error.h"

namespace flashdesk::test {
namespace {

const std::filesystem::path kSource(FD_SOURCE_DIR);
const std::filesystem::path kImage = kSource / "assets/eval/demo/images/image-0.png";

ChatEngine& engine() {
  static std::unique_ptr<ChatEngine> e = [] {
    EngineOptions o;
    o.threads = 2;
    return ChatEngine::load(kSource / "assets/models/flash-tiny", o);
  }();
  return *e;
}

TurnOptions short_turn() {
  TurnOptions t;
  t.mode = ThinkingMode::kChat;
  t.generation.max_new_tokens = 6;
  t.generation.prefill.mode = PrefillMode::Exact;
  return t;
}

TEST(ChatImages, ImageTurnPrefillsTheSpanAndTheNextTurnReusesIt) {
  ASSERT_TRUE(engine().has_vision());
  const ImageRef img = engine().prepare_image(kImage);
  EXPECT_EQ(img->pixels.grid.rows, 4);
  EXPECT_EQ(img->pixels.grid.cols, 4);
  EXPECT_EQ(img->digest.size(), 64u);
  ChatSession session(engine());
  const std::vector<ImageRef> images{img};
  const TurnResult t1 =
      session.send(user_turn("How many shapes are there?", images), short_turn(), {});
  const int32_t image_id = static_cast<int32_t>(engine().config().image_token_id);
  EXPECT_EQ(std::count(t1.prompt_ids.begin(), t1.prompt_ids.end(), image_id), 22);  // 4*5+2
  const TurnResult t2 = session.send(user_turn("And the colours?"), short_turn(), {});
  // The whole first prompt (with its image span) and the answer stay live.
  EXPECT_GE(t2.generation.stats.reused_tokens, static_cast<int64_t>(t1.prompt_ids.size()));
  EXPECT_EQ(std::count(t2.prompt_ids.begin(), t2.prompt_ids.end(), image_id), 22);
}

TEST(ChatImages, MismatchedImagePartsAreInvalidRequests) {
  const ImageRef img = engine().prepare_image(kImage);
  const std::vector<ImageRef> one{img};
  // A user turn keeps its images with its parts; embedding spans and images of different counts
  // or grids (a caller's own rendering) is refused.
  const RenderedTurn rendered =
      render_conversation(engine().chat_template(), Conversation{"", {user_turn("x", one)}}, {});
  ASSERT_EQ(rendered.prompt.images.size(), 1u);
  EXPECT_THROW(engine().embed_images(rendered.prompt.images, {}, 0), InvalidRequest);
  ImageSpan wrong_grid = rendered.prompt.images[0];
  wrong_grid.grid.cols += 1;
  EXPECT_THROW(engine().embed_images(std::span<const ImageSpan>(&wrong_grid, 1), one, 0),
               InvalidRequest);
  EXPECT_EQ(engine().embed_images(rendered.prompt.images, one, 0).size(), 1u);
}
TEST(ChatImages, BadFilesAreTypedErrors) {
  EXPECT_THROW(engine().prepare_image(kSource / "no/such/picture.png"), IoError);
  EXPECT_THROW(engine().prepare_image(kSource / "assets/models/flash-tiny/config.json"),
               FormatError);
}

TEST(ChatImages, DemoEvalRunsImageItems) {
  const auto items = load_eval_items(kSource / "assets/eval/demo/eval.jsonl");
  const auto it = std::find_if(items.begin(), items.end(),
                               [](const EvalItem& i) { return !i.image_paths.empty(); });
  ASSERT_NE(it, items.end());
  DemoEval eval(engine(), 8);
  const EvalOutcome o = eval.run(*it, PrefillMode::Exact);
  EXPECT_TRUE(o.template_matches);  // the grid from the real image renders the Python prompt
  EXPECT_GT(o.thinking_tokens, 0);
}

}  // namespace
}  // namespace flashdesk::test
