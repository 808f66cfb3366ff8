// UTF-8 validation, lossy conversion and incomplete-tail detection (see utf8.h).
#include "engine/tokenizer/utf8.h"

namespace flashdesk::utf8 {

bool is_valid(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const Unit u = decode(bytes, i);
    if (!u.valid()) return false;
    i += u.size;
  }
  return true;
}

std::string to_valid(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const Unit u = decode(bytes, i);
    if (u.valid())
      out.append(bytes.data() + i, u.size);
    else
      out.append("\xEF\xBF\xBD");
    i += u.size;
  }
  return out;
}

size_t incomplete_tail(std::string_view bytes) {
  // A sequence is at most 4 bytes, so only a lead byte among the last 3 can start an
  // incomplete one. An ill-formed tail is not held back: no later byte can repair it.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const Unit u = decode(bytes, n - back);
    // Incomplete iff decoding ran out of input (not an ill-formed byte) before the end.
    const bool truncated = !u.valid() && u.size == back && b >= 0xC2 && b <= 0xF4;
    return truncated ? back : 0;
  }
  return 0;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace flashdesk::utf8
