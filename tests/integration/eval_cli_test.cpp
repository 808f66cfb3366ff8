// `flashdesk-cli eval --details` through the built binary on the demo model: one JSON line per
// item and prefill mode, agreeing with the printed table; an unwritable path is an error; a prompt
// the C++ template renders differently from the Python renderer fails the run.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
using flashdesk::testing::run_cli;

const std::string kModel = std::string(FD_SOURCE_DIR) + "/assets/models/flash-tiny";
const std::string kData = std::string(FD_SOURCE_DIR) + "/assets/eval/demo";

TEST(EvalCli, DetailsHaveOneLinePerItemAndModeMatchingTheTable) {
  const fs::path out =
      fs::temp_directory_path() / ("fd_eval_details_" + std::to_string(::getpid()));
  const auto r = run_cli("eval --model '" + kModel + "' --data '" + kData +
                         "' --tasks copy --limit 1 --threads 1 --details '" + out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  fs::remove(out);
  ASSERT_EQ(lines.size(), 4u);  // copy introduce + copy repeat, each exact and bounded
  for (const auto& j : lines) {
    for (const char* key :
         {"id", "cell", "prefill", "expected", "answer", "thinking", "reference_thinking"})
      EXPECT_TRUE(j.at(key).is_string()) << key;
    EXPECT_TRUE(j.at("correct").is_boolean());
    EXPECT_TRUE(j.at("prefill") == "exact" || j.at("prefill") == "bounded");
    // the table shows 100.0% or 0.0% for a cell of one item: the same verdict as the line's
    const std::string cell = j.at("cell");
    const auto row = r.output.find("\n" + cell + " ");
    ASSERT_NE(row, std::string::npos) << cell << " not in\n" << r.output;
    const std::string text = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
    char name_a[32], name_b[32];
    long long n = 0;
    double exact = -1, bounded = -1;
    ASSERT_EQ(std::sscanf(text.c_str(), "%31s %31s %lld %lf%% %lf%%", name_a, name_b, &n, &exact,
                          &bounded),
              5)
        << text;
    const double shown = j.at("prefill") == "exact" ? exact : bounded;
    EXPECT_EQ(shown == 100.0, j.at("correct").get<bool>()) << text;
  }
}

// An item whose stored Python rendering differs from the C++ template's: the table is printed,
// but the command fails and says why.
TEST(EvalCli, APromptTheTemplateRendersDifferentlyFailsTheRun) {
  const fs::path dir = fs::temp_directory_path() / ("fd_eval_data_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ifstream in(kData + "/eval.jsonl");
    std::ofstream out(dir / "eval.jsonl");
    for (std::string line; std::getline(in, line);) {
      auto item = nlohmann::json::parse(line);
      if (item.at("task") != "copy") continue;
      item["prompt_text"] = item.at("prompt_text").get<std::string>() + " ";
      out << item.dump() << "\n";
      break;
    }
  }
  const auto r = run_cli("eval --model '" + kModel + "' --data '" + dir.string() +
                         "' --tasks copy --limit 1 --threads 1 --prefill exact");
  fs::remove_all(dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("chat template: 1 prompts differed from the Python renderer's"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("eval: 1 prompts rendered by the C++ chat template differ"),
            std::string::npos)
      << r.output;
}

// --cells runs the rows whose names start with one of the given texts, and no others.
TEST(EvalCli, CellsRunTheRowsNamedByTheirStart) {
  const auto r = run_cli("eval --model '" + kModel + "' --data '" + kData +
                         "' --cells 'copy rep,recall wording 5' --limit 1 --threads 1 --prefill "
                         "exact");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\ncopy repeat "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\nrecall wording 500 "), std::string::npos) << r.output;
  for (const char* other :
       {"\ncopy introduce ", "\nrecall 500 ", "\nrecall wording 1000 ", "\nimage ", "\nadd "})
    EXPECT_EQ(r.output.find(other), std::string::npos) << other << " in\n" << r.output;
}

TEST(EvalCli, UnwritableDetailsPathIsAnErrorBeforeAnyWork) {
  const auto r = run_cli("eval --model '" + kModel + "' --data '" + kData +
                         "' --tasks copy --limit 1 --details /no/such/dir/details.jsonl");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("cannot write /no/such/dir/details.jsonl"), std::string::npos)
      << r.output;
}

}  // namespace
