// `flashdesk-cli tokenize` through the built binary: ids as the parity data expects, exact
// round trips through --decode, and errors as messages with a non-zero exit.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

std::string data(const std::string& rel) {
  return std::string(FD_SOURCE_DIR) + "/tests/data/tokenizers/" + rel;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct CliRun {
  int exit_code;
  std::string out, err;
};

// Runs the CLI with `args`, feeding `input` on stdin.
CliRun run_cli(const std::string& args, const std::string& input) {
  const fs::path dir =
      fs::temp_directory_path() / ("fd_tokenize_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "in", std::ios::binary) << input;
  const std::string cmd = std::string("'") + FD_CLI_PATH + "' tokenize " + args + " < '" +
                          (dir / "in").string() + "' > '" + (dir / "out").string() + "' 2> '" +
                          (dir / "err").string() + "'";
  const int status = std::system(cmd.c_str());
  CliRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "out"), slurp(dir / "err")};
  fs::remove_all(dir);
  return r;
}

std::string ids_line(const nlohmann::json& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ' ';
    s += std::to_string(ids[i].get<int>());
  }
  return s + "\n";
}

const std::string kV3 = "--tokenizer '" + data("deepseek-v3/tokenizer.json") + "'";

TEST(TokenizeCli, EncodesAsTheParityDataExpects) {
  const auto expected =
      nlohmann::json::parse(slurp(data("deepseek-v3/expected_ids.json")))["documents"];
  for (const char* doc : {"special_tokens.txt", "odd_unicode.txt", "whitespace.txt"}) {
    const CliRun r = run_cli(kV3, slurp(data(std::string("corpus/") + doc)));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, ids_line(expected[doc])) << doc;
  }
}

TEST(TokenizeCli, DecodeRoundTripsExactly) {
  const std::string text = slurp(data("corpus/emoji.txt")) + "\r\n<｜User｜> trailing  ";
  const CliRun enc = run_cli(kV3, text);
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  const CliRun dec = run_cli(kV3 + " --decode", enc.out);
  ASSERT_EQ(dec.exit_code, 0) << dec.err;
  EXPECT_EQ(dec.out, text);
  EXPECT_EQ(run_cli(kV3 + " --decode --skip-special", "0 19923 1").out, "Hello");
}

TEST(TokenizeCli, PlainModeDoesNotMatchSpecialTokens) {
  const CliRun r = run_cli(kV3 + " --plain", "<｜User｜>");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("128803"), std::string::npos) << r.out;
  EXPECT_EQ(run_cli(kV3, "<｜User｜>").out, "128803\n");
}

TEST(TokenizeCli, ErrorsAreMessagesWithNonZeroExit) {
  const CliRun no_file = run_cli("", "x");
  EXPECT_NE(no_file.exit_code, 0);
  EXPECT_NE(no_file.err.find("--tokenizer"), std::string::npos) << no_file.err;

  const fs::path bad = fs::temp_directory_path() / "fd_bad_tokenizer.json";
  std::ofstream(bad) << R"({"model": {"type": "Unigram", "vocab": []}})";
  const CliRun bad_model = run_cli("--tokenizer '" + bad.string() + "'", "x");
  fs::remove(bad);
  EXPECT_EQ(bad_model.exit_code, 1);
  EXPECT_NE(bad_model.err.find("fd_bad_tokenizer.json"), std::string::npos) << bad_model.err;
  EXPECT_NE(bad_model.err.find("unsupported tokenizer model type \"Unigram\""), std::string::npos)
      << bad_model.err;

  const CliRun bad_ids = run_cli(kV3 + " --decode", "12 abc");
  EXPECT_EQ(bad_ids.exit_code, 1);
  EXPECT_NE(bad_ids.err.find("abc"), std::string::npos) << bad_ids.err;
  const CliRun unknown_id = run_cli(kV3 + " --decode", "999999");
  EXPECT_EQ(unknown_id.exit_code, 1);
  EXPECT_NE(unknown_id.err.find("999999"), std::string::npos) << unknown_id.err;
}

}  // namespace
