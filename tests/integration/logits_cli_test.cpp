// `flashdesk-cli logits` run as a user would (docs/logits-dump.md): the file's names, shapes and
// greedy bookkeeping, --all-positions, --block-inputs fed with the engine's own dump (which must
// reproduce it exactly), and bad options / inputs as clear errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/safetensors.h"
#include "tests/engine/checkpoint_test_util.h"
#include "tests/integration/cli_runner.h"

namespace flashdesk {
namespace {

using testing::run_cli;

class LogitsCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const auto cfg = std::filesystem::path(FD_SOURCE_DIR) / "assets/configs/test-every-role.json";
    const auto r =
        run_cli("make-random --config " + cfg.string() + " --out " + model() + " --seed 3");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ofstream(ids_file())
        << "5 17 300 2 99 41 7 7 8 120 33 64 1 250 11 12 13 14 15 16 17 18 19 20 21\n";
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return (dir_->path() / "model").string(); }
  static std::string ids_file() { return (dir_->path() / "ids.txt").string(); }
  static std::string out(const std::string& name) { return (dir_->path() / name).string(); }

  static std::vector<int64_t> shape(const SafetensorsFile& f, const std::string& name) {
    const SafetensorsEntry* e = f.find(name);
    return e ? e->shape : std::vector<int64_t>{-1};
  }
  template <class T>
  static std::vector<T> values(const SafetensorsFile& f, const std::string& name) {
    const SafetensorsEntry* e = f.find(name);
    std::vector<T> v(e->nbytes / sizeof(T));
    std::memcpy(v.data(), f.data(*e), e->nbytes);
    return v;
  }

  static testing::TempDir* dir_;
};
testing::TempDir* LogitsCli::dir_ = nullptr;

using Shape = std::vector<int64_t>;

TEST_F(LogitsCli, DumpHasTheDocumentedTensors) {
  const auto r = run_cli("logits --model " + model() + " --ids " + ids_file() +
                         " --decode 3 --dump --out " + out("a.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SafetensorsFile f(out("a.safetensors"));
  const int64_t P = 25, V = 512, L = 14, hc = 4, D = 256, K = 16, W = 16;
  EXPECT_EQ(shape(f, "prompt_ids"), (Shape{P}));
  EXPECT_EQ(shape(f, "prefill_logits"), (Shape{1, V}));
  EXPECT_EQ(shape(f, "decode_logits"), (Shape{3, V}));
  EXPECT_EQ(shape(f, "prefill_embed"), (Shape{P, D}));
  EXPECT_EQ(shape(f, "prefill_block_out"), (Shape{L, P, hc, D}));
  EXPECT_EQ(shape(f, "prefill_block_pre_mix"), (Shape{L, P, hc}));
  EXPECT_EQ(shape(f, "prefill_attn_out"), (Shape{L, P, D}));
  EXPECT_EQ(shape(f, "prefill_ffn_out"), (Shape{L, P, D}));
  EXPECT_EQ(shape(f, "prefill_expert_ids"), (Shape{L, P, 2}));
  EXPECT_EQ(shape(f, "prefill_expert_weights"), (Shape{L, P, 2}));
  EXPECT_EQ(shape(f, "prefill_engram_out.layer1"), (Shape{P, hc, D}));
  EXPECT_EQ(shape(f, "prefill_engram_out.layer5"), (Shape{P, hc, D}));
  EXPECT_EQ(shape(f, "prefill_engram_hash_ids"), (Shape{P, 2, 6}));
  for (int layer : {2, 5, 8, 10, 12})
    EXPECT_EQ(shape(f, "prefill_topk_idxs.layer" + std::to_string(layer)), (Shape{P, K}));
  EXPECT_EQ(f.find("prefill_topk_idxs.layer3"), nullptr);  // Reuse layers publish none
  EXPECT_EQ(shape(f, "prefill_candidates.layer8"), (Shape{P, P}));
  EXPECT_EQ(shape(f, "prefill_compress_kv.layer2"), (Shape{P / 2, 128}));
  EXPECT_EQ(shape(f, "prefill_index_k.layer8"), (Shape{P, 64}));
  EXPECT_EQ(shape(f, "prefill_window_kv_cache.layer13"), (Shape{W, 128}));
  EXPECT_EQ(shape(f, "prefill_positions_run"), (Shape{L, P}));
  EXPECT_EQ(shape(f, "decode_embed"), (Shape{3, 1, D}));
  EXPECT_EQ(shape(f, "decode_block_out"), (Shape{3, L, 1, hc, D}));
  EXPECT_EQ(shape(f, "decode_topk_idxs.layer8"), (Shape{3, 1, K}));
  EXPECT_EQ(shape(f, "decode_candidates.layer8"), (Shape{3, 1, P + 3}));
  EXPECT_EQ(shape(f, "decode_compress_kv.layer8"), (Shape{P + 3, 128}));
  EXPECT_EQ(f.metadata().at("prefill_mode"), "exact");
  EXPECT_EQ(f.metadata().at("config_name"), "test-every-role");
  EXPECT_EQ(f.metadata().at("all_positions"), "false");
  // Greedy bookkeeping: step t feeds the previous argmax at position P + t.
  const auto pre = values<float>(f, "prefill_logits");
  const auto dec = values<float>(f, "decode_logits");
  const auto in = values<int64_t>(f, "decode_input_ids");
  const auto pos = values<int64_t>(f, "decode_positions");
  const auto am = values<int64_t>(f, "decode_argmax");
  EXPECT_EQ(in[0], std::max_element(pre.begin(), pre.end()) - pre.begin());
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(pos[t], P + t);
    EXPECT_EQ(am[t], std::max_element(dec.begin() + t * V, dec.begin() + (t + 1) * V) -
                         (dec.begin() + t * V));
    if (t > 0) {
      EXPECT_EQ(in[t], am[t - 1]);
    }
  }
  // Published top-k: entry + P in the prefill, -1 = none; entries of position p are < p + 1.
  const auto tk = values<int64_t>(f, "prefill_topk_idxs.layer8");
  for (int64_t p = 0; p < P; ++p)
    for (int64_t c = 0; c < K; ++c) {
      const int64_t v = tk[p * K + c];
      EXPECT_TRUE(v == -1 || (v >= P && v - P <= p)) << p << "," << c << ": " << v;
    }
}

TEST_F(LogitsCli, OwnBlockInputsReproduceTheRunExactly) {
  ASSERT_EQ(run_cli("logits --model " + model() + " --ids " + ids_file() +
                    " --decode 2 --dump --out " + out("b.safetensors"))
                .exit_code,
            0);
  const auto r = run_cli("logits --model " + model() + " --block-inputs " + out("b.safetensors") +
                         " --dump --out " + out("c.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SafetensorsFile b(out("b.safetensors")), c(out("c.safetensors"));
  for (const char* name : {"prompt_ids", "decode_input_ids"})
    EXPECT_EQ(values<int64_t>(b, name), values<int64_t>(c, name)) << name;
  for (const char* name :
       {"prefill_logits", "decode_logits", "prefill_block_out", "decode_block_out"})
    EXPECT_EQ(values<float>(b, name), values<float>(c, name)) << name;
}

// Its own caches set back into the run change nothing, and the report says none differed.
TEST_F(LogitsCli, OwnBlockCachesAgreeAndReproduceTheRun) {
  ASSERT_EQ(run_cli("logits --model " + model() + " --ids " + ids_file() +
                    " --decode 3 --dump --out " + out("f.safetensors"))
                .exit_code,
            0);
  const auto r = run_cli("logits --model " + model() + " --block-inputs " + out("f.safetensors") +
                         " --block-caches --dump --out " + out("g.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("compressed entries: 0 of "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("index keys: 0 of "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("0 of 0 values"), std::string::npos) << "nothing was compared";
  SafetensorsFile f(out("f.safetensors")), g(out("g.safetensors"));
  for (const char* name : {"prefill_logits", "decode_logits", "decode_block_out"})
    EXPECT_EQ(values<float>(f, name), values<float>(g, name)) << name;
}

TEST_F(LogitsCli, AllPositionsEndsWithTheLastPositionsLogits) {
  ASSERT_EQ(run_cli("logits --model " + model() + " --ids " + ids_file() + " --out " +
                    out("d.safetensors"))
                .exit_code,
            0);
  const auto r = run_cli("logits --model " + model() + " --ids " + ids_file() +
                         " --all-positions --out " + out("e.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SafetensorsFile d(out("d.safetensors")), e(out("e.safetensors"));
  EXPECT_EQ(shape(e, "prefill_logits"), (Shape{25, 512}));
  const auto last = values<float>(d, "prefill_logits"), all = values<float>(e, "prefill_logits");
  EXPECT_TRUE(std::equal(last.begin(), last.end(), all.end() - 512));
  EXPECT_EQ(e.metadata().at("all_positions"), "true");
}

// --ranks 2 splits the model over two ranks of the process (heads, output groups, experts): the
// same greedy ids as one rank, logits within the reductions' FP32 order, recorded in the file.
TEST_F(LogitsCli, TwoRanksDecodeAsOne) {
  for (const char* ranks : {"1", "2"}) {
    const auto r = run_cli("logits --model " + model() + " --ids " + ids_file() +
                           " --decode 4 --backend cpu --ranks " + ranks + " --out " +
                           out(std::string("ranks") + ranks + ".safetensors"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  SafetensorsFile one(out("ranks1.safetensors")), two(out("ranks2.safetensors"));
  EXPECT_EQ(two.metadata().at("ranks"), "2");
  EXPECT_EQ(values<int64_t>(one, "decode_argmax"), values<int64_t>(two, "decode_argmax"));
  for (const char* name : {"prefill_logits", "decode_logits"}) {
    const auto a = values<float>(one, name), b = values<float>(two, name);
    ASSERT_EQ(a.size(), b.size()) << name;
    float spread = 0, diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      spread = std::max(spread, std::fabs(a[i]));
      diff = std::max(diff, std::fabs(a[i] - b[i]));
    }
    EXPECT_LE(diff, 0.02f * spread) << name;
  }
  const std::string base = "logits --model " + model() + " --ids " + ids_file() + " --out " +
                           out("x.safetensors") + " --ranks ";
  auto r = run_cli(base + "4");  // the every-role config has 2 output groups
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("o_groups must divide over the devices"), std::string::npos) << r.output;
  r = run_cli(base + "2 --dump");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--ranks does not combine with --dump"), std::string::npos) << r.output;
  r = run_cli(base + "0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--ranks must be 1-64"), std::string::npos) << r.output;
}

TEST_F(LogitsCli, BadRequestsAreClearErrors) {
  const std::string base = "logits --model " + model() + " --out " + out("x.safetensors");
  auto expect_error = [&](const std::string& args, const std::string& says) {
    const auto r = run_cli(base + " " + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << args << ": " << r.output;
  };
  expect_error("--ids " + ids_file() + " --prefill bounded --all-positions", "exact prefill");
  expect_error("--ids " + ids_file() + " --prefill fast", "prefill mode");
  expect_error("--prompt hello", "tokenizer.json");  // a random checkpoint has no tokenizer
  expect_error("--prompt hello --ids " + ids_file(), "one of --ids");
  expect_error("--ids " + ids_file() + " --block-caches", "--block-caches needs --block-inputs");
  std::ofstream(out("bad_ids.txt")) << "5 six 7";
  expect_error("--ids " + out("bad_ids.txt"), "bad_ids.txt");
  std::ofstream(out("range_ids.txt")) << "[5, 512]";
  expect_error("--ids " + out("range_ids.txt"), "outside the vocabulary");
  expect_error("--ids " + out("missing.txt"), "missing.txt");
  const auto r = run_cli("logits --ids " + ids_file());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
}

TEST_F(LogitsCli, PromptIsRenderedWithTheChatTemplate) {
  // The test tokenizer's ids reach 564: a model with 576 vocabulary rows.
  const auto src = std::filesystem::path(FD_SOURCE_DIR);
  nlohmann::json cfg =
      nlohmann::json::parse(std::ifstream(src / "assets/configs/test-every-role.json"));
  cfg["text_config"]["vocab_size"] = 576;
  const std::string cfg_path = out("vocab576.json"), dir = out("vocab576");
  std::ofstream(cfg_path) << cfg.dump(2);
  ASSERT_EQ(run_cli("make-random --config " + cfg_path + " --out " + dir + " --seed 4").exit_code,
            0);
  std::filesystem::copy_file(src / "tests/data/tokenizers/tiny/tokenizer.json",
                             std::filesystem::path(dir) / "tokenizer.json");
  for (const char* thinking : {"on", "off"}) {
    const auto r = run_cli("logits --model " + dir + " --prompt hello --thinking " + thinking +
                           " --decode 1 --out " + out("p.safetensors"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    SafetensorsFile f(out("p.safetensors"));
    const auto ids = values<int64_t>(f, "prompt_ids");
    ASSERT_GE(ids.size(), 4u);
    EXPECT_EQ(ids.front(), 561);                                   // <｜begin▁of▁sentence｜>
    EXPECT_NE(std::find(ids.begin(), ids.end(), 558), ids.end());  // <｜User｜>
    EXPECT_EQ(ids[ids.size() - 2], 559);                           // <｜Assistant｜>
    EXPECT_EQ(ids.back(), std::string(thinking) == "on" ? 556 : 557);  // <think> / </think>
  }
}

}  // namespace
}  // namespace flashdesk
