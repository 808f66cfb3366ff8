// Fuzzes the tokenizer: parsing tokenizer.json from arbitrary bytes (first byte odd) and building
// Engram's compressed-token map from what parsed, and encoding arbitrary bytes with the small
// fixed test tokenizer (first byte even), checking that decoding gives the bytes back, streaming
// agrees with decode, the chat template renders and Engram's normalisation gives valid UTF-8.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/checkpoint/engram_map.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/compressed_token_map.h"
#include "engine/tokenizer/engram_normalizer.h"
#include "engine/tokenizer/streaming_decoder.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "engine/util/error.h"

namespace {

using flashdesk::Tokenizer;

const Tokenizer& fixed_tokenizer() {
  static const Tokenizer tok = [] {
    const auto path =
        std::filesystem::path(FD_SOURCE_DIR) / "tests/data/tokenizers/tiny/tokenizer.json";
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return Tokenizer::from_json(s.str(), path.string());
  }();
  return tok;
}

void parse(std::string_view json) {
  try {
    const Tokenizer tok = Tokenizer::from_json(json, "fuzz/tokenizer.json");
    const auto ids = tok.encode("Hello, world! 123 \xe4\xbd\xa0\xe5\xa5\xbd <|x|>\n\n");
    (void)tok.decode(ids);
    if (tok.size() > 20000) return;  // keep executions fast
    const flashdesk::CompressedTokenMap map = flashdesk::build_compressed_token_map(tok);
    if (static_cast<int64_t>(map.ids.size()) != tok.size()) std::abort();
    if (!flashdesk::token_map_problem(map.ids, map.size).empty()) std::abort();
  } catch (const flashdesk::Error&) {
    // A typed error is the expected outcome for malformed input.
  }
}

void encode(std::string_view text) {
  const Tokenizer& tok = fixed_tokenizer();
  const std::vector<flashdesk::TokenId> ids = tok.encode(text);
  if (tok.decode_bytes(ids) != text) std::abort();  // the tiny tokenizer strips nothing
  flashdesk::StreamingDecoder stream(tok);
  std::string streamed;
  for (auto id : ids) streamed += stream.push(id);
  streamed += stream.finish();
  if (streamed != tok.decode(ids)) std::abort();
  if (!flashdesk::utf8::is_valid(flashdesk::engram_normalize(flashdesk::utf8::to_valid(text))))
    std::abort();
  const flashdesk::ChatTemplate chat(tok);
  const std::vector<flashdesk::ChatMessage> conv = {
      flashdesk::ChatMessage::user(std::string(text))};
  try {
    (void)chat.render(conv, flashdesk::ChatOptions{});
  } catch (const flashdesk::InvalidRequest&) {
    // The text spelled the image placeholder.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1)
    parse(rest);
  else
    encode(rest);
  return 0;
}
