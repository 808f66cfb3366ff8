// Text normalization of tokenizer.json: the subset of HF normalizers we implement.
//
// DeepSeek's tokenizers use an empty Sequence (identity). We also implement the two simple
// string rewrites SentencePiece-style files use; Unicode normal forms and case folding are not
// implemented and are refused at load time.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace flashdesk {

struct NormalizerStep {
  enum class Kind { kReplace, kPrepend } kind;
  std::string pattern;  // kReplace: the literal to find
  std::string content;  // kReplace: its replacement; kPrepend: the prefix
};

struct Normalizer {
  std::vector<NormalizerStep> steps;  // applied in order

  bool identity() const { return steps.empty(); }
  std::string apply(std::string_view text) const;
};

}  // namespace flashdesk
