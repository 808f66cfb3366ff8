// SAX reading of tokenizer.json (see tokenizer_json_reader.h).
#include "engine/tokenizer/tokenizer_json_reader.h"

#include "engine/tokenizer/bpe_model.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

using nlohmann::json;

// Builds the DOM iteratively (no recursion, so deeply nested input cannot exhaust the stack)
// and diverts the entries of model.vocab and model.merges into the document's vectors.
class Reader : public nlohmann::json_sax<json> {
 public:
  explicit Reader(TokenizerJsonDocument& doc) : doc_(doc) {}
  const std::string& error() const { return error_; }

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return integer(v, json(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    return integer(v > uint64_t(INT64_MAX) ? -1 : int64_t(v), json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool binary(binary_t&) override { return fail("binary values are not JSON"); }

  bool string(string_t& s) override {
    if (mode_ == Mode::kMerges) return merge_string(s);
    if (mode_ == Mode::kMergePair) {
      pair_.push_back(std::move(s));
      return pair_.size() <= 2 || fail(merge_field() + ": a merge pair has two strings");
    }
    if (mode_ == Mode::kVocab) return fail("model.vocab." + key_ + ": expected an integer id");
    return value(json(std::move(s)));
  }

  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom) return fail(capture_field() + ": unexpected object");
    const bool vocab = key_ == "vocab" && at_model();
    push(json::object());
    if (vocab) mode_ = Mode::kVocab, doc_.vocab.emplace();
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) mode_ = Mode::kDom;
    stack_.pop_back();
    return true;
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) return mode_ = Mode::kMergePair, true;
    if (mode_ != Mode::kDom) return fail(capture_field() + ": unexpected array");
    const bool merges = key_ == "merges" && at_model();
    push(json::array());
    if (merges) mode_ = Mode::kMerges, doc_.merges.emplace();
    return true;
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2) return fail(merge_field() + ": a merge pair has two strings");
      doc_.merges->emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      pair_.clear();
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) mode_ = Mode::kDom;
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    return fail("invalid JSON at byte " + std::to_string(position) + ": " + e.what());
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  bool fail(std::string what) {
    if (error_.empty()) error_ = std::move(what);
    return false;
  }
  // The object being filled is "model" directly under the root.
  bool at_model() const { return stack_.size() == 2 && model_ && stack_.back() == model_; }
  std::string merge_field() const {
    return "model.merges[" + std::to_string(doc_.merges->size()) + "]";
  }
  std::string capture_field() const {
    return mode_ == Mode::kVocab ? "model.vocab" : merge_field();
  }

  bool integer(int64_t id, json v) {
    if (mode_ != Mode::kVocab)
      return mode_ == Mode::kDom ? value(std::move(v))
                                 : fail(merge_field() + ": expected a string");
    if (id < 0 || id > kMaxTokenId)
      return fail("model.vocab." + key_ + ": id " + v.dump() + " out of range");
    doc_.vocab->emplace_back(std::move(key_), static_cast<int32_t>(id));
    return true;
  }

  bool merge_string(std::string& s) {  // "left right": exactly one space, as HF requires
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
      return fail(merge_field() + ": expected \"left right\" with one space, got \"" +
                  s.substr(0, 64) + "\"");
    doc_.merges->emplace_back(s.substr(0, sp), s.substr(sp + 1));
    return true;
  }

  bool value(json v) {
    if (mode_ != Mode::kDom) return fail(capture_field() + ": unexpected value");
    if (stack_.empty()) {
      doc_.root = std::move(v);
    } else if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(v));
    } else {
      (*stack_.back())[key_] = std::move(v);
    }
    return true;
  }

  // Adds a container where the next value goes and makes it the one being filled.
  void push(json container) {
    json* slot;
    if (stack_.empty()) {
      doc_.root = std::move(container);
      slot = &doc_.root;
    } else if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(container));
      slot = &stack_.back()->back();
    } else {
      slot = &((*stack_.back())[key_] = std::move(container));
      if (stack_.size() == 1 && key_ == "model") model_ = slot;
    }
    stack_.push_back(slot);
  }

  TokenizerJsonDocument& doc_;
  std::vector<json*> stack_;  // containers being filled, innermost last
  json* model_ = nullptr;
  Mode mode_ = Mode::kDom;
  std::string key_;
  std::vector<std::string> pair_;
  std::string error_;
};

}  // namespace

TokenizerJsonDocument read_tokenizer_json(std::string_view text, const std::string& file) {
  TokenizerJsonDocument doc;
  Reader reader(doc);
  const bool ok = json::sax_parse(text.begin(), text.end(), &reader);
  if (!ok || !reader.error().empty())
    throw FormatError(file, reader.error().empty() ? "invalid JSON" : reader.error());
  return doc;
}

}  // namespace flashdesk
