// A model updated in place (one weight byte changed, config and headers byte-identical): a saved
// session resumed on it reuses no KV from the SSD, where the unchanged model reuses every full
// block. End to end through PersistentChat, real SQLite files, real block files and a real copy
// of the demo model.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include "engine/checkpoint/safetensors.h"
#include "persistent_chat_test_util.h"

namespace flashdesk::storage {
namespace {

using testing::chat_options;
using testing::kDemoModel;
using testing::load_engine;
using testing::long_text;
using testing::TempDir;
using testing::turn_options;

// XORs one byte in the middle of a tensor's data, in whichever shard holds it: a model retrained
// by one step, as far as the files show (same names, sizes, headers and config).
void change_one_weight_byte(const std::filesystem::path& dir, const std::string& tensor) {
  std::filesystem::path file;
  uint64_t offset = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.path().filename().string().starts_with("model-")) continue;
    const SafetensorsFile f(entry.path());
    if (const SafetensorsEntry* e = f.find(tensor)) {
      file = entry.path();
      offset = e->offset + e->nbytes / 2;
    }
  }
  ASSERT_FALSE(file.empty()) << tensor << " is in no shard of " << dir;
  const int fd = ::open(file.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << file;
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
  b ^= 0x04;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

// A two-turn session saved with the model in `model_dir`; returns its id.
int64_t save_session(const TempDir& data, const std::filesystem::path& model_dir) {
  auto engine = load_engine(model_dir);
  PersistentChat chat(*engine, chat_options(data));
  const TurnOptions t = turn_options(PrefillMode::Bounded);
  const int64_t id = chat.create_session("update", chat.settings_for(t, "Be brief."));
  chat.send(long_text(12), t);
  chat.send("And the mill?", t);
  chat.flush();
  return id;
}

// Reopens the session on the model in `model_dir` and sends one more turn.
GenerationStats resume(const TempDir& data, const std::filesystem::path& model_dir, int64_t id) {
  auto engine = load_engine(model_dir);
  PersistentChat chat(*engine, chat_options(data));
  chat.open_session(id);
  return chat.send("Tell me more.", turn_options(PrefillMode::Bounded)).turn.generation.stats;
}

TEST(ModelUpdate, OneChangedWeightByteReusesNoKvFromTheSsd) {
  TempDir model, data;
  std::filesystem::copy(kDemoModel, model.path() / "m", std::filesystem::copy_options::recursive);
  const auto dir = model.path() / "m";
  const int64_t id = save_session(data, dir);

  // Control: the same files reuse every full block of the conversation.
  const GenerationStats same = resume(data, dir, id);
  ASSERT_GT(same.reused_ssd_tokens, 0);

  const std::string before = load_engine(dir)->fingerprint();
  change_one_weight_byte(dir, "layers.5.ffn.experts.3.w1.weight");
  EXPECT_NE(load_engine(dir)->fingerprint(), before);
  const GenerationStats updated = resume(data, dir, id);
  EXPECT_EQ(updated.reused_ssd_tokens, 0);
  EXPECT_EQ(updated.reused_tokens, 0);
  EXPECT_EQ(updated.bytes_read, 0);
  EXPECT_EQ(updated.computed_tokens, updated.prompt_tokens);
}

}  // namespace
}  // namespace flashdesk::storage
