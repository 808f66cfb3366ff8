// `flashdesk-cli eval --suite demo`: runs the demo model's held-out eval set and prints accuracy
// per cell (recall by distance, arithmetic by operation and effort, images) for exact and
// bounded prefill side by side; --details writes every item's output as JSON lines, for looking
// at what the model got wrong.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <cxxopts.hpp>
#include <nlohmann/json.hpp>

#include "app/cli/turn_options.h"
#include "engine/runtime/demo_eval.h"
#include "engine/util/error.h"

namespace flashdesk::cli {
namespace {

// Table rows in reading order: recall by distance, then arithmetic, then the rest.
std::string sort_key(const std::string& cell) {
  char buf[64];
  int n = 0;
  if (std::sscanf(cell.c_str(), "recall %d", &n) == 1) {
    std::snprintf(buf, sizeof buf, "0 %06d", n);
    return buf;
  }
  char op[16];
  if (std::sscanf(cell.c_str(), "%15s e%d", op, &n) == 2) {
    std::snprintf(buf, sizeof buf, "1 %s %03d", op, n);
    return buf;
  }
  return "2 " + cell;
}

struct Row {
  std::string cell;
  EvalCell exact, bounded;
};

// One line of the --details file: the item, the prefill mode, and what the model wrote next to
// what the generator would have written.
std::string details_line(const EvalItem& item, const char* prefill, const EvalOutcome& o) {
  const nlohmann::json j = {{"id", item.id},
                            {"cell", item.cell},
                            {"prefill", prefill},
                            {"correct", o.correct},
                            {"expected", item.expected},
                            {"answer", o.answer},
                            {"thinking", o.thinking},
                            {"reference_thinking", item.reference_thinking},
                            {"thinking_tokens", o.thinking_tokens}};
  // Invalid UTF-8 in a model's output (a cut multi-byte character) is replaced, not fatal.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// What the command line asks for, validated.
struct EvalRequest {
  std::string data;
  std::string which;               // exact | bounded | both
  std::string tasks;               // ",a,b," or ",," for all
  std::vector<std::string> cells;  // table rows to run, by the start of their names; empty: all
  int64_t limit = 10;
  int64_t max_tokens = 1024;
  std::optional<std::string> details;
};

cxxopts::Options eval_options() {
  cxxopts::Options options("flashdesk-cli eval", "Evaluate a model on a held-out suite.");
  add_model_options(options);
  options.add_options()("suite", "the suite: demo",
                        cxxopts::value<std::string>()->default_value("demo"))(
      "data", "directory holding eval.jsonl",
      cxxopts::value<std::string>()->default_value("assets/eval/demo"))(
      "prefill", "exact, bounded or both", cxxopts::value<std::string>()->default_value("both"))(
      "limit", "items per cell (0 = all)", cxxopts::value<int64_t>()->default_value("10"))(
      "tasks", "comma-separated tasks to run (default: all)",
      cxxopts::value<std::string>()->default_value(""))(
      "cells",
      "comma-separated table rows to run, each by the start of its name (\"image wording,recall "
      "wording\"; default: all)",
      cxxopts::value<std::string>()->default_value(""))(
      "max-tokens", "most tokens generated per item",
      cxxopts::value<int64_t>()->default_value("1024"))(
      "details", "write each item's answer and thinking to this file (JSON lines)",
      cxxopts::value<std::string>())("h,help", "show this help");
  return options;
}

EvalRequest eval_request(const cxxopts::ParseResult& args) {
  if (args["suite"].as<std::string>() != "demo") throw InvalidRequest("the only suite is 'demo'");
  EvalRequest r;
  r.data = args["data"].as<std::string>();
  r.which = args["prefill"].as<std::string>();
  if (r.which != "exact" && r.which != "bounded" && r.which != "both")
    throw InvalidRequest("--prefill must be exact, bounded or both");
  r.tasks = "," + args["tasks"].as<std::string>() + ",";
  std::stringstream cells(args["cells"].as<std::string>());
  for (std::string cell; std::getline(cells, cell, ',');)
    if (!cell.empty()) r.cells.push_back(cell);
  r.limit = args["limit"].as<int64_t>();
  r.max_tokens = args["max-tokens"].as<int64_t>();
  if (args.count("details")) r.details = args["details"].as<std::string>();
  return r;
}

struct EvalRun {
  std::map<std::string, Row> rows;         // by sort_key
  std::map<std::string, int64_t> skipped;  // items without a vision tower, by cell
  int64_t template_mismatches = 0;         // items whose C++ rendering differs from Python's
};

// Runs every selected item in each requested prefill mode; writes --details lines as it goes.
EvalRun run_items(ChatEngine& engine, const EvalRequest& request, std::ofstream* details) {
  DemoEval eval(engine, request.max_tokens);
  EvalRun run;
  for (const EvalItem& item : load_eval_items(std::filesystem::path(request.data) / "eval.jsonl")) {
    if (request.tasks != ",," && request.tasks.find("," + item.task + ",") == std::string::npos)
      continue;
    if (!request.cells.empty() &&
        std::none_of(request.cells.begin(), request.cells.end(),
                     [&](const std::string& c) { return item.cell.starts_with(c); }))
      continue;
    Row& row = run.rows[sort_key(item.cell)];
    row.cell = item.cell;
    if (request.limit > 0 && std::max(row.exact.n, row.bounded.n) >= request.limit) continue;
    if (!item.image_paths.empty() && !engine.has_vision()) {
      ++run.skipped[item.cell];
      continue;
    }
    bool matches = true;
    for (const char* mode : {"exact", "bounded"}) {
      if (request.which != "both" && request.which != mode) continue;
      const EvalOutcome o = eval.run(item, parse_prefill_mode(mode));
      EvalCell& c = std::string(mode) == "exact" ? row.exact : row.bounded;
      ++c.n;
      c.correct += o.correct;
      c.thinking_tokens += o.thinking_tokens;
      matches = matches && o.template_matches;
      if (details) *details << details_line(item, mode, o);
    }
    run.template_mismatches += matches ? 0 : 1;
    std::fprintf(stderr, ".");
  }
  std::fprintf(stderr, "\n");
  return run;
}

std::string percent(const EvalCell& c) {
  if (c.n == 0) return "-";
  char b[16];
  std::snprintf(b, sizeof b, "%.1f%%", 100.0 * c.accuracy());
  return b;
}

void print_table(const EvalRun& run) {
  std::printf("%-16s %5s %9s %9s %10s %10s\n", "cell", "n", "exact", "bounded", "think(ex)",
              "think(bd)");
  for (const auto& [key, row] : run.rows) {
    if (row.exact.n + row.bounded.n == 0) {
      const auto skipped = run.skipped.find(row.cell);
      std::printf("%-16s %5lld %9s %9s   (%lld items skipped: the model has no vision tower)\n",
                  row.cell.c_str(), 0LL, "-", "-",
                  (long long)(skipped == run.skipped.end() ? 0 : skipped->second));
      continue;
    }
    std::printf("%-16s %5lld %9s %9s %10.1f %10.1f\n", row.cell.c_str(),
                (long long)std::max(row.exact.n, row.bounded.n), percent(row.exact).c_str(),
                percent(row.bounded).c_str(), row.exact.mean_thinking(),
                row.bounded.mean_thinking());
  }
}

}  // namespace

// Exit status: 0, or 1 when any prompt rendered by the C++ template differed from the Python
// renderer's (the accuracies would then be of prompts the model was not trained on).
int run_eval(int argc, char** argv) {
  cxxopts::Options options = eval_options();
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  const EvalRequest request = eval_request(args);
  std::optional<std::ofstream> details;
  if (request.details) {
    details.emplace(*request.details, std::ios::binary | std::ios::trunc);
    if (!*details) throw IoError("cannot write " + *request.details);
  }
  auto engine = ChatEngine::load(args["model"].as<std::string>(), engine_options(args));
  const auto t0 = std::chrono::steady_clock::now();
  const EvalRun run = run_items(*engine, request, details ? &*details : nullptr);
  if (details && !details->flush()) throw IoError("cannot write " + *request.details);
  const double minutes =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 60.0;
  print_table(run);
  const int64_t mismatches = run.template_mismatches;
  std::printf("chat template: %lld prompts differed from the Python renderer's; %.1f minutes\n",
              (long long)mismatches, minutes);
  if (mismatches == 0) return 0;
  std::fprintf(stderr,
               "eval: %lld prompts rendered by the C++ chat template differ from the Python "
               "renderer's prompt_text; the table above measured prompts the model was not "
               "trained on\n",
               (long long)mismatches);
  return 1;
}

}  // namespace flashdesk::cli
