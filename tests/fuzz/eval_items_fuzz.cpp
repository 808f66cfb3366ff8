// Fuzzes the eval-set reader (`flashdesk-cli eval --data DIR` reads DIR/eval.jsonl): any bytes
// give items or a FormatError naming the line, never a crash.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "engine/runtime/demo_eval.h"
#include "engine/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    flashdesk::parse_eval_items(in, "fuzz/eval.jsonl");
  } catch (const flashdesk::FormatError&) {
  }
  return 0;
}
