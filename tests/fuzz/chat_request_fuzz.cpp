// Fuzzes the API server's request parser: any bytes give a ChatRequest or an ApiError (a 4xx for
// the client), never a crash or another exception.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "app/server/api_error.h"
#include "app/server/chat_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    flashdesk::server::parse_chat_request(
        std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const flashdesk::server::ApiError&) {
  }
  return 0;
}
