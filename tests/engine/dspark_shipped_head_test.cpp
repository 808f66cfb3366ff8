// The DSpark head that ships with the demo model (assets/models/flash-tiny, trained on the GPU
// machine: docs/dspark.md "Figures"): it loads from its own shard in the published layout, greedy
// answers with it are token for token the plain greedy answers, and it drafts tokens the target
// accepts. A random head accepts none of 100+ drafts here (docs/dspark.md), so the acceptance
// bound below fails for a head that is lost, not loaded, or drafting from wrong features.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/checkpoint/config.h"
#include "engine/model/dspark_draft.h"
#include "engine/runtime/chat_engine.h"
#include "engine/tokenizer/reasoning_effort.h"
#include "tests/engine/checkpoint_test_util.h"
#include "tests/engine/dspark_test_util.h"

namespace flashdesk::test {
namespace {

const std::filesystem::path kTiny =
    std::filesystem::path(FD_SOURCE_DIR) / "assets/models/flash-tiny";

// Accepted drafts per verify over the prompts below must exceed this. Measured with the engine
// (cpu and cpu-reference alike): 111 of 117 drafts over 24 verifies, 4.6 per verify. The bound
// is well below that, so that a retrained head with lower acceptance still passes (the dev set's
// mean is 2.8, docs/dspark.md), and far above a random head's 0.
constexpr double kMinAcceptedPerVerify = 2.0;

class DsparkShippedHead : public ::testing::TestWithParam<std::string> {
 protected:
  ChatEngine& engine() {
    static std::map<std::string, std::unique_ptr<ChatEngine>> engines;
    std::unique_ptr<ChatEngine>& e = engines[GetParam()];
    if (!e) {
      EngineOptions o;
      o.backend = GetParam();
      o.threads = 2;
      e = ChatEngine::load(kTiny, o);
    }
    return *e;
  }

  static TurnOptions turn(ThinkingMode mode, bool speculative) {
    TurnOptions t;
    t.mode = mode;
    t.effort = ReasoningEffort::of(75);
    t.generation.max_new_tokens = 96;
    t.generation.speculative = speculative;
    return t;
  }
};

TEST_P(DsparkShippedHead, LoadsFromItsOwnShard) {
  ChatEngine& e = engine();
  const TextConfig& t = e.config().text;
  EXPECT_EQ(dspark_stages(t), 3);
  EXPECT_EQ(t.dspark_block_size, 5);
  const std::shared_ptr<const Checkpoint> ck = Checkpoint::open(kTiny);
  ASSERT_TRUE(ck->has("mtp.0.main_proj.weight"));
  ASSERT_TRUE(ck->has("mtp.2.markov_head.head.weight"));
  EXPECT_NO_THROW(DsparkDrafter drafter(e.model()));
  EXPECT_TRUE(e.has_draft_head());
}

TEST_P(DsparkShippedHead, GreedyAnswersAreThePlainOnesWithDraftsAccepted) {
  struct Prompt {
    const char* text;
    ThinkingMode mode;
  };
  const Prompt prompts[] = {
      {"Tell me a long story about a cat and a dog.", ThinkingMode::kChat},
      {"What is 4821 + 1367?", ThinkingMode::kThinking},
      {"What is the capital of France?", ThinkingMode::kChat},
  };
  int64_t verifies = 0, accepted = 0, drafted = 0;
  for (const Prompt& p : prompts) {
    SCOPED_TRACE(p.text);
    ChatSession plain(engine()), spec(engine());
    const TurnResult off = plain.send(user_turn(p.text), turn(p.mode, false), {});
    const TurnResult on = spec.send(user_turn(p.text), turn(p.mode, true), {});
    EXPECT_EQ(on.generation.reasoning_ids, off.generation.reasoning_ids);
    EXPECT_EQ(on.generation.content_ids, off.generation.content_ids);
    EXPECT_EQ(on.generation.finish, off.generation.finish);
    EXPECT_EQ(off.generation.stats.verifies, 0);
    verifies += on.generation.stats.verifies;
    accepted += on.generation.stats.accepted;
    drafted += on.generation.stats.drafted;
  }
  ASSERT_GT(verifies, 0);
  const double per_verify = static_cast<double>(accepted) / static_cast<double>(verifies);
  RecordProperty("accepted_per_verify", std::to_string(per_verify));
  EXPECT_GT(per_verify, kMinAcceptedPerVerify)
      << accepted << " of " << drafted << " drafts accepted over " << verifies << " verifies";
}

// has_draft_head is false for the same model without its head: the config without stages, the
// index without the head's entries, no head shard. (A config that declares stages whose weights
// are missing is refused at load, so a declared head is a loaded one on one device.)
TEST(ChatEngineDraftHead, FalseForFlashTinyWithoutItsHead) {
  testing::TempDir dir;
  write_flash_tiny_target(dir.path());
  const auto entries = [](const std::filesystem::path& d) {
    return nlohmann::json::parse(std::ifstream(d / "model.safetensors.index.json"))["weight_map"]
        .size();
  };
  ASSERT_LT(entries(dir.path()), entries(kTiny));  // the head's entries were there
  EngineOptions o;
  o.threads = 2;
  const std::unique_ptr<ChatEngine> e = ChatEngine::load(dir.path(), o);
  EXPECT_EQ(dspark_stages(e->config().text), 0);
  EXPECT_FALSE(e->has_draft_head());
}

INSTANTIATE_TEST_SUITE_P(BothCpuBackends, DsparkShippedHead,
                         ::testing::Values("cpu-reference", "cpu"));

}  // namespace
}  // namespace flashdesk::test
