// The speculative decoding setting shared by the CLI and the app: its words, and Automatic's rule
// (on for a model with a draft head on a GPU backend only; docs/dspark.md "Default").
#include <gtest/gtest.h>

#include "engine/runtime/speculative_choice.h"

namespace flashdesk {
namespace {

TEST(SpeculativeChoice, WordsRoundTripAndOthersAreRefused) {
  for (const SpeculativeChoice c :
       {SpeculativeChoice::kAuto, SpeculativeChoice::kOn, SpeculativeChoice::kOff})
    EXPECT_EQ(parse_speculative_choice(speculative_choice_name(c)), c);
  EXPECT_EQ(speculative_choice_name(SpeculativeChoice::kOn), "dspark");
  for (const char* bad : {"", "on", "Auto", "1", "dspark "})
    EXPECT_FALSE(parse_speculative_choice(bad).has_value()) << bad;
}

TEST(SpeculativeChoice, AutomaticIsOnOnlyWithAHeadOnAGpu) {
  const auto automatic = [](bool head, const char* backend) {
    return speculative_enabled(SpeculativeChoice::kAuto, head, backend);
  };
  EXPECT_TRUE(automatic(true, "cuda"));
  EXPECT_TRUE(automatic(true, "cuda:0"));
  EXPECT_TRUE(automatic(true, "cuda:3"));
  EXPECT_FALSE(automatic(false, "cuda:0"));  // no head: nothing to draft with
  EXPECT_FALSE(automatic(true, "cpu"));      // measured slower there (0.87-0.96x)
  EXPECT_FALSE(automatic(true, "cpu-reference"));
  EXPECT_FALSE(automatic(true, "cpu-optimized-avx512"));
  EXPECT_FALSE(automatic(true, "remote"));
  EXPECT_FALSE(automatic(true, "cudagraph"));  // a name that only starts like a GPU's
  for (const bool head : {false, true})
    for (const char* backend : {"cpu", "cuda:0"}) {
      EXPECT_TRUE(speculative_enabled(SpeculativeChoice::kOn, head, backend));
      EXPECT_FALSE(speculative_enabled(SpeculativeChoice::kOff, head, backend));
    }
}

}  // namespace
}  // namespace flashdesk
