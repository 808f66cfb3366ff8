// Engram key normalisation with ICU's C API: UTF-16 for the normal forms, code points for the rest.
#include "engine/tokenizer/engram_normalizer.h"

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <string>

#include "engine/tokenizer/utf8.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

constexpr char32_t kSentinel = 0xE000;  // private use: survives NFKC, NFD and lowercasing

void check_icu(UErrorCode status, const char* what) {
  FD_CHECK(U_SUCCESS(status), std::string("ICU ") + what + ": " + u_errorName(status));
}

std::u16string to_utf16(std::string_view text) {
  std::u16string out(text.size(), u'\0');  // UTF-16 never needs more units than UTF-8 bytes
  int32_t length = 0;
  UErrorCode status = U_ZERO_ERROR;
  // Ill-formed bytes become U+FFFD rather than an error (callers pass valid text anyway).
  u_strFromUTF8WithSub(out.data(), static_cast<int32_t>(out.size()), &length, text.data(),
                       static_cast<int32_t>(text.size()), 0xFFFD, nullptr, &status);
  check_icu(status, "UTF-8 to UTF-16");
  out.resize(static_cast<size_t>(length));
  return out;
}

std::u16string normalize(const UNormalizer2* form, const std::u16string& text) {
  std::u16string out(text.size() * 3 + 4, u'\0');
  for (;;) {
    UErrorCode status = U_ZERO_ERROR;
    const int32_t n = unorm2_normalize(form, text.data(), static_cast<int32_t>(text.size()),
                                       out.data(), static_cast<int32_t>(out.size()), &status);
    if (status == U_BUFFER_OVERFLOW_ERROR) {
      out.resize(static_cast<size_t>(n));
      continue;
    }
    check_icu(status, "normalize");
    out.resize(static_cast<size_t>(n));
    return out;
  }
}

// One code point's full lowercase mapping in the root locale, with no context around it.
void append_lowercase(UChar32 c, std::u32string& out) {
  if (c < 0x80) {
    out.push_back(static_cast<char32_t>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    return;
  }
  UChar src[2], dst[8];
  int32_t src_len = 0;
  U16_APPEND_UNSAFE(src, src_len, c);
  UErrorCode status = U_ZERO_ERROR;
  const int32_t n = u_strToLower(dst, 8, src, src_len, "", &status);
  check_icu(status, "lowercase");
  for (int32_t i = 0; i < n;) {
    UChar32 lower;
    U16_NEXT(dst, i, n, lower);
    out.push_back(static_cast<char32_t>(lower));
  }
}

// NFD text without its combining marks, each remaining character lowercased.
std::u32string strip_marks_and_lowercase(const std::u16string& text) {
  std::u32string out;
  out.reserve(text.size());
  const int32_t n = static_cast<int32_t>(text.size());
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U16_NEXT(text.data(), i, n, c);
    if ((U_GET_GC_MASK(c) & U_GC_M_MASK) != 0) continue;
    append_lowercase(c, out);
  }
  return out;
}

bool is_collapsed_space(char32_t c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// The regex replace `[ \t\r\n]+` -> " ".
std::u32string collapse_spaces(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  bool in_run = false;
  for (char32_t c : text) {
    const bool space = is_collapsed_space(c);
    if (!space || !in_run) out.push_back(space ? U' ' : c);
    in_run = space;
  }
  return out;
}

}  // namespace

std::string engram_normalize(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const UNormalizer2* nfkc = unorm2_getNFKCInstance(&status);
  check_icu(status, "NFKC instance");
  const UNormalizer2* nfd = unorm2_getNFDInstance(&status);
  check_icu(status, "NFD instance");
  const std::u16string decomposed = normalize(nfd, normalize(nfkc, to_utf16(text)));
  std::u32string s = collapse_spaces(strip_marks_and_lowercase(decomposed));
  if (s == U" ") s = std::u32string(1, kSentinel);
  size_t begin = 0, end = s.size();
  while (begin < end && u_isUWhiteSpace(static_cast<UChar32>(s[begin]))) ++begin;
  while (end > begin && u_isUWhiteSpace(static_cast<UChar32>(s[end - 1]))) --end;
  std::string out;
  out.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) utf8::append(out, s[i] == kSentinel ? U' ' : s[i]);
  return out;
}

const char* engram_normalizer_unicode_version() {
  return U_UNICODE_VERSION;
}

}  // namespace flashdesk
