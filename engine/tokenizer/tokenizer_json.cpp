// tokenizer.json -> TokenizerParts, with a FormatError naming the field for anything unexpected.
#include "engine/tokenizer/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "engine/tokenizer/split_patterns.h"
#include "engine/tokenizer/tokenizer_json_reader.h"
#include "engine/tokenizer/utf8.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

using nlohmann::json;

// Nested Sequence objects are walked recursively; real files nest one level.
constexpr int kMaxNesting = 16;

// Reads fields of one JSON object, naming `path.key` in every error.
class Fields {
 public:
  Fields(const json& obj, std::string path, const std::string& file)
      : obj_(obj), path_(std::move(path)), file_(file) {
    if (!obj_.is_object()) fail(path_, std::string("expected an object, got ") + obj_.type_name());
  }

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw FormatError(file_, field + ": " + what);
  }
  std::string at(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

  const json* find(const char* key) const {
    const auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  const json& require(const char* key) const {
    const json* v = find(key);
    if (!v) fail(at(key), "missing");
    return *v;
  }
  std::string string(const char* key) const {
    const json& v = require(key);
    if (!v.is_string()) fail(at(key), std::string("expected a string, got ") + v.type_name());
    return v.get<std::string>();
  }
  bool boolean(const char* key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean())
      fail(at(key), std::string("expected true or false, got ") + v->type_name());
    return v->get<bool>();
  }
  int32_t id(const char* key) const {
    const json& v = require(key);
    if (!v.is_number_integer())
      fail(at(key), std::string("expected an integer id, got ") + v.type_name());
    const auto n = v.get<int64_t>();
    if (n < 0 || n > kMaxTokenId) fail(at(key), "id " + std::to_string(n) + " out of range");
    return static_cast<int32_t>(n);
  }
  const std::string& file() const { return file_; }

 private:
  const json& obj_;
  std::string path_;
  const std::string& file_;
};

std::string item(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

BpeSpec parse_model(const json& j, TokenizerJsonDocument& doc, const std::string& file) {
  const Fields f(j, "model", file);
  // Old files omit model.type; HF then recognises BPE by its merges.
  const std::string type = f.find("type") ? f.string("type") : (doc.merges ? "BPE" : "");
  if (type != "BPE")
    f.fail(f.at("type"), "unsupported tokenizer model type \"" + type + "\" (only BPE)");
  const json* dropout = f.find("dropout");
  if (dropout && (!dropout->is_number() || dropout->get<double>() > 0))
    f.fail(f.at("dropout"), "BPE dropout is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (f.find(key)) f.fail(f.at(key), "not supported");
  if (!doc.vocab)
    f.fail(f.at("vocab"), f.find("vocab") ? "expected an object of token -> id" : "missing");
  if (!doc.merges) f.fail(f.at("merges"), f.find("merges") ? "expected an array" : "missing");
  BpeSpec spec;
  spec.vocab = std::move(*doc.vocab);
  spec.merges = std::move(*doc.merges);
  if (f.find("unk_token")) spec.unk_token = f.string("unk_token");
  spec.byte_fallback = f.boolean("byte_fallback", false);
  spec.ignore_merges = f.boolean("ignore_merges", false);
  return spec;
}

std::vector<AddedToken> parse_added_tokens(const json& root, const std::string& file) {
  std::vector<AddedToken> tokens;
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return tokens;
  if (!it->is_array()) throw FormatError(file, "added_tokens: expected an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const Fields f((*it)[i], item("added_tokens", i), file);
    AddedToken t;
    t.content = f.string("content");
    if (t.content.empty()) f.fail(f.at("content"), "empty");
    t.id = f.id("id");
    t.special = f.boolean("special", false);
    t.lstrip = f.boolean("lstrip", false);
    t.rstrip = f.boolean("rstrip", false);
    t.normalized = f.boolean("normalized", !t.special);
    t.single_word = f.boolean("single_word", false);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

void parse_normalizer(const json& j, const std::string& path, const std::string& file,
                      Normalizer& out, int depth = 0) {
  const Fields f(j, path, file);
  if (depth > kMaxNesting) f.fail(path, "Sequences nested too deeply");
  const std::string type = f.string("type");
  if (type == "Sequence") {
    const json& list = f.require("normalizers");
    if (!list.is_array()) f.fail(f.at("normalizers"), "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_normalizer(list[i], item(f.at("normalizers"), i), file, out, depth + 1);
  } else if (type == "Replace") {
    const Fields pattern(f.require("pattern"), f.at("pattern"), file);
    if (!pattern.find("String"))
      pattern.fail(pattern.at("String"), "only literal (String) patterns are supported");
    const std::string literal = pattern.string("String");
    if (literal.empty()) pattern.fail(pattern.at("String"), "empty");
    out.steps.push_back({NormalizerStep::Kind::kReplace, literal, f.string("content")});
  } else if (type == "Prepend") {
    out.steps.push_back({NormalizerStep::Kind::kPrepend, "", f.string("prepend")});
  } else {
    f.fail(f.at("type"), "unsupported normalizer type \"" + type + "\"");
  }
}

SplitBehavior parse_behavior(const Fields& f) {
  const std::string b = f.string("behavior");
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  f.fail(f.at("behavior"), "unknown split behavior \"" + b + "\"");
}

SplitPattern parse_split_pattern(const Fields& f) {
  const Fields p(f.require("pattern"), f.at("pattern"), f.file());
  if (p.find("Regex")) {
    const std::string regex = p.string("Regex");
    if (auto pattern = recognise_regex(regex)) return *pattern;
    p.fail(p.at("Regex"), "unsupported pre-tokenizer regex \"" + regex.substr(0, 200) +
                              "\" (the DeepSeek and GPT-2 patterns are implemented)");
  }
  const std::string literal = p.string("String");
  if (literal.empty()) p.fail(p.at("String"), "empty");
  SplitPattern pattern{SplitPatternKind::kLiteral, {}};
  for (size_t i = 0; i < literal.size();) {
    const utf8::Unit u = utf8::decode(literal, i);
    pattern.literal.push_back(u.cp);
    i += u.size;
  }
  return pattern;
}

void parse_pre_tokenizer(const json& j, const std::string& path, const std::string& file,
                         PreTokenizerSpec& out, int depth = 0) {
  const Fields f(j, path, file);
  if (depth > kMaxNesting) f.fail(path, "Sequences nested too deeply");
  const std::string type = f.string("type");
  if (out.byte_level) f.fail(path, "a " + type + " step after ByteLevel is not supported");
  if (type == "Sequence") {
    const json& list = f.require("pretokenizers");
    if (!list.is_array()) f.fail(f.at("pretokenizers"), "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_pre_tokenizer(list[i], item(f.at("pretokenizers"), i), file, out, depth + 1);
  } else if (type == "Split") {
    if (f.boolean("invert", false)) f.fail(f.at("invert"), "inverted splits are not supported");
    out.steps.push_back({parse_split_pattern(f), parse_behavior(f)});
  } else if (type == "ByteLevel") {
    out.byte_level_regex = f.boolean("use_regex", true);
    out.add_prefix_space = f.boolean("add_prefix_space", true);
    out.byte_level = true;
  } else {
    f.fail(f.at("type"), "unsupported pre-tokenizer type \"" + type + "\"");
  }
}

void parse_decoder(const json& j, const std::string& path, const std::string& file,
                   DecoderSpec& out, int depth = 0) {
  const Fields f(j, path, file);
  if (depth > kMaxNesting) f.fail(path, "Sequences nested too deeply");
  const std::string type = f.string("type");
  if (type == "Sequence") {
    const json& list = f.require("decoders");
    if (!list.is_array()) f.fail(f.at("decoders"), "expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_decoder(list[i], item(f.at("decoders"), i), file, out, depth + 1);
  } else if (type == "ByteLevel") {
    out.byte_level = true;
  } else if (type == "ByteFallback") {
    out.byte_fallback = true;
  } else if (type != "Fuse") {  // Fuse only joins strings, which decode() does anyway
    f.fail(f.at("type"), "unsupported decoder type \"" + type + "\"");
  }
}

}  // namespace

TokenizerParts parse_tokenizer_json(std::string_view json_text, const std::string& file) {
  TokenizerJsonDocument doc = read_tokenizer_json(json_text, file);
  const json& root = doc.root;
  const Fields f(root, "", file);
  TokenizerParts parts;
  parts.model = parse_model(f.require("model"), doc, file);
  parts.added_tokens = parse_added_tokens(root, file);
  if (const json* n = f.find("normalizer"))
    parse_normalizer(*n, "normalizer", file, parts.normalizer);
  if (const json* p = f.find("pre_tokenizer"))
    parse_pre_tokenizer(*p, "pre_tokenizer", file, parts.pre_tokenizer);
  if (const json* d = f.find("decoder")) parse_decoder(*d, "decoder", file, parts.decoder);
  parts.model.byte_level = parts.pre_tokenizer.byte_level;
  if (parts.decoder.byte_level && !parts.model.byte_level)
    f.fail("decoder.type", "a ByteLevel decoder needs a ByteLevel pre-tokenizer");
  return parts;
}

}  // namespace flashdesk
