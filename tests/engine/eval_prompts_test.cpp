// Every prompt of the shipped demo eval set, rendered by the C++ chat template (pictures decoded
// for their grids), equals the Python renderer's prompt_text stored with the item: the eval
// measures the model on the prompts it was trained to read, and `flashdesk-cli eval` fails when
// one differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "engine/runtime/chat_engine.h"
#include "engine/runtime/demo_eval.h"

namespace flashdesk::test {
namespace {

const std::filesystem::path kSource(FD_SOURCE_DIR);

// Where two texts first differ, with a little context, for the failure message.
std::string first_difference(const std::string& want, const std::string& got) {
  const auto at = static_cast<size_t>(
      std::mismatch(want.begin(),
                    want.begin() + static_cast<std::ptrdiff_t>(std::min(want.size(), got.size())),
                    got.begin())
          .first -
      want.begin());
  const size_t from = at < 40 ? 0 : at - 40;
  return "at byte " + std::to_string(at) + ": Python '" + want.substr(from, 80) + "' vs C++ '" +
         got.substr(from, 80) + "'";
}

TEST(EvalPrompts, TheShippedSetsCellsAreItsRows) {
  // The table's rows, with the cells of wordings kept out of training apart from the others.
  std::map<std::string, int> cells;
  for (const EvalItem& item : load_eval_items(kSource / "assets/eval/demo/eval.jsonl"))
    ++cells[item.cell];
  const std::map<std::string, int> some = {
      {"recall 200", 20},           {"recall 4000", 20},      {"recall wording 500", 10},
      {"recall wording 2000", 10},  {"add e25", 20},          {"wording_add e50", 20},
      {"wording_sub e75", 20},      {"image other_size", 74}, {"image count_short", 74},
      {"image wording", 74},        {"copy repeat", 20},      {"wording_add_later e50", 20},
      {"wording_sub_later e75", 20}};
  for (const auto& [cell, n] : some) EXPECT_EQ(cells[cell], n) << cell;
}

TEST(EvalPrompts, EveryShippedPromptRendersAsThePythonRendererDid) {
  EngineOptions o;
  o.threads = 1;
  const auto engine = ChatEngine::load(kSource / "assets/models/flash-tiny", o);
  DemoEval eval(*engine, 1);
  const auto items = load_eval_items(kSource / "assets/eval/demo/eval.jsonl");
  ASSERT_GT(items.size(), 500u);
  int64_t differ = 0, with_images = 0;
  for (const EvalItem& item : items) {
    with_images += item.image_paths.empty() ? 0 : 1;
    const std::string got = eval.render_prompt_text(item);
    if (got == item.prompt_text) continue;
    if (++differ <= 3) ADD_FAILURE() << item.id << " " << first_difference(item.prompt_text, got);
  }
  EXPECT_EQ(differ, 0);
  EXPECT_GT(with_images, 0);
  std::printf(
      "%zu eval prompts rendered (%lld with pictures), %lld differ from the Python "
      "renderer's\n",
      items.size(), static_cast<long long>(with_images), static_cast<long long>(differ));
}

}  // namespace
}  // namespace flashdesk::test
