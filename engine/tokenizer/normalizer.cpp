// The implemented normalizer steps (see normalizer.h).
#include "engine/tokenizer/normalizer.h"

namespace flashdesk {
namespace {

std::string replace_all(std::string_view text, std::string_view pattern, std::string_view with) {
  std::string out;
  size_t from = 0;
  for (size_t at; (at = text.find(pattern, from)) != std::string_view::npos;
       from = at + pattern.size()) {
    out.append(text.substr(from, at - from));
    out.append(with);
  }
  out.append(text.substr(from));
  return out;
}

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const NormalizerStep& step : steps) {
    if (step.kind == NormalizerStep::Kind::kReplace)
      s = replace_all(s, step.pattern, step.content);
    else if (!s.empty())  // HF prepends only to non-empty text
      s = step.content + s;
  }
  return s;
}

}  // namespace flashdesk
