// libFuzzer target: config.json parsing, validation and role derivation must turn any text into
// a ModelConfig or a FormatError; an accepted config must size its tensors without overflow.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/checkpoint/config.h"
#include "engine/checkpoint/model_stats.h"
#include "engine/checkpoint/tensor_spec.h"
#include "engine/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const flashdesk::ModelConfig config = flashdesk::parse_model_config(text, "fuzz/config.json");
    const auto roles = flashdesk::derive_layer_roles(config.text);
    if (static_cast<int64_t>(roles.size()) != config.text.num_hidden_layers) __builtin_trap();
    flashdesk::kv_bytes_per_token(config);
    // Listing tensors is linear in layers x experts; keep the fuzzer fast on huge configs.
    const auto& t = config.text;
    if ((t.num_hidden_layers + flashdesk::dspark_stages(t)) *
            (t.n_routed_experts + t.dspark_n_routed_experts) <=
        20000)
      for (const auto& spec : flashdesk::expected_tensors(config))
        if (spec.numel() < 0) __builtin_trap();
  } catch (const flashdesk::FormatError&) {
  }
  return 0;
}
