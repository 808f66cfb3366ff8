// Decoding a segment into code units with class flags (see text_units.h).
#include "engine/tokenizer/text_units.h"

#include "engine/tokenizer/unicode_class.h"
#include "engine/tokenizer/utf8.h"

namespace flashdesk {

void TextUnits::assign(std::string_view text) {
  cp.clear();
  flags.clear();
  offset.clear();
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const auto* end = p + text.size();
  for (const uint8_t* q = p; q < end;) {
    const utf8::Unit u = utf8::decode(q, end);
    cp.push_back(u.cp);
    flags.push_back(u.valid() ? unicode::class_flags(u.cp) : 0);
    offset.push_back(static_cast<uint32_t>(q - p));
    q += u.size;
  }
  offset.push_back(static_cast<uint32_t>(text.size()));
}

}  // namespace flashdesk
