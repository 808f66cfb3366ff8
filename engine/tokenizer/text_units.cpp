// Decoding a segment into code units with class flags (see text_units.h).
#include "engine/tokenizer/text_units.h"

#include "engine/tokenizer/unicode_class.h"
#include "engine/tokenizer/utf8.h"

namespace flashdesk {

void TextUnits::assign(std::string_view text) {
  // Sized for the worst case (one unit per byte) and trimmed after: no growth in the loop.
  cp.resize(text.size());
  flags.resize(text.size());
  offset.resize(text.size() + 1);
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const auto* end = p + text.size();
  size_t n = 0;
  for (const uint8_t* q = p; q < end; ++n) {
    offset[n] = static_cast<uint32_t>(q - p);
    if (*q < 0x80) {
      cp[n] = *q;
      flags[n] = unicode::class_flags(*q);
      ++q;
      continue;
    }
    const utf8::Unit u = utf8::decode(q, end);
    cp[n] = u.cp;
    flags[n] = u.valid() ? unicode::class_flags(u.cp) : 0;
    q += u.size;
  }
  offset[n] = static_cast<uint32_t>(text.size());
  cp.resize(n);
  flags.resize(n);
  offset.resize(n + 1);
}

}  // namespace flashdesk
