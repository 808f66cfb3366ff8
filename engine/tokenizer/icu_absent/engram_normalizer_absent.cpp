// Engram's text normalisation in a build without ICU (engine/CMakeLists.txt): a model whose
// Engram map is not shipped cannot get one here, and the error says what to do.
#include "engine/tokenizer/engram_normalizer.h"

#include "engine/util/error.h"

namespace flashdesk {

std::string engram_normalize(std::string_view) {
  throw InvalidRequest(
      "this FlashDesk was built without ICU, so it cannot build Engram's compressed-token map "
      "from tokenizer.json: ship engram_map.safetensors with the model (tools/engram_map.py), or "
      "build with libicu-dev installed");
}

const char* engram_normalizer_unicode_version() {
  return "none (built without ICU)";
}

}  // namespace flashdesk
