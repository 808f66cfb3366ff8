// Bad requests and bad model directories give typed errors, never a crash, and a refused request
// leaves the sequence untouched.
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/engine/model_test_util.h"

namespace flashdesk::test {
namespace {

TEST(ModelBadInput, PromptLongerThanTheContextIsRefused) {
  LoadedModel m = load_every_role(2, ModelOptions{32, {}});
  SequenceState s = m.model->new_sequence();
  const auto ids = test_prompt(33, m.model->config().text.vocab_size);
  EXPECT_THROW(m.model->prefill(s, ids, PrefillOptions{}), InvalidRequest);
  EXPECT_EQ(s.position(), 0);
  m.model->prefill(s, std::vector<int32_t>(ids.begin(), ids.begin() + 32), PrefillOptions{});
  EXPECT_THROW(m.model->decode(s, 5), InvalidRequest);  // the 33rd token
  EXPECT_EQ(s.position(), 32);
}

TEST(ModelBadInput, TokenIdsOutsideTheVocabularyAreRefused) {
  LoadedModel m = load_every_role();
  const int32_t V = static_cast<int32_t>(m.model->config().text.vocab_size);
  SequenceState s = m.model->new_sequence();
  for (int32_t bad : {-1, V, V + 1000}) {
    const std::vector<int32_t> ids = {5, bad, 7};
    EXPECT_THROW(m.model->prefill(s, ids, PrefillOptions{}), InvalidRequest) << bad;
    EXPECT_EQ(s.position(), 0);
  }
  EXPECT_THROW(m.model->prefill(s, {}, PrefillOptions{}), InvalidRequest);
  EXPECT_THROW(
      m.model->prefill(s, std::vector<int32_t>{5}, PrefillOptions{PrefillMode::Bounded, 0, true}),
      InvalidRequest);
  EXPECT_THROW(parse_prefill_mode("fast"), InvalidRequest);
  SequenceStep st;
  st.state = &s;
  const std::vector<int32_t> one = {5};
  st.tokens = one;
  st.decoder_from = 3;  // beyond the step's only position (0), yet its logits are wanted
  EXPECT_THROW(m.model->step(std::span<SequenceStep>(&st, 1)), InvalidRequest);
  SequenceStep twice[2] = {st, st};
  twice[0].decoder_from = twice[1].decoder_from = -1;
  EXPECT_THROW(m.model->step(twice), InvalidRequest);  // the same sequence twice
  EXPECT_EQ(s.position(), 0);
}

// A copy of the every-role model directory whose files a test may break.
class BrokenModelDir {
 public:
  BrokenModelDir() {
    for (const auto& e : std::filesystem::directory_iterator(every_role_model_dir()))
      std::filesystem::copy(e.path(), dir_.path() / e.path().filename());
  }
  const std::filesystem::path& path() const { return dir_.path(); }

 private:
  TempDir dir_;
};

std::unique_ptr<Model> open_model(const std::filesystem::path& dir, Backend& be) {
  return std::make_unique<Model>(Checkpoint::open(dir), be);
}

TEST(ModelBadInput, MissingEngramMapIsAFormatErrorNamingIt) {
  BrokenModelDir dir;
  std::filesystem::remove(dir.path() / "engram_map.safetensors");
  CpuReferenceBackend be(1);
  try {
    open_model(dir.path(), be);
    FAIL() << "no error";
  } catch (const FormatError& e) {
    // Neither the map nor a tokenizer.json to build it from (a random checkpoint has none).
    EXPECT_NE(std::string(e.what()).find("engram_map.safetensors"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
}

TEST(ModelBadInput, ConfigThatDisagreesWithTheTensorsIsAFormatError) {
  BrokenModelDir dir;
  const auto cfg_path = dir.path() / "config.json";
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(cfg_path));
  cfg["text_config"]["moe_intermediate_size"] = 96;  // the tensors were made for 64
  std::ofstream(cfg_path) << cfg.dump(2);
  CpuReferenceBackend be(1);
  EXPECT_THROW(open_model(dir.path(), be), FormatError);
}

}  // namespace
}  // namespace flashdesk::test
