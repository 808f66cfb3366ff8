// Session export/import as JSON, with a validation error for every field that can be wrong.
#include "storage/session_json.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "engine/util/error.h"
#include "storage/base64.h"
#include "storage/file_util.h"

namespace flashdesk::storage {

using nlohmann::json;

namespace {

// Reads fields of untrusted JSON, naming the path of anything wrong.
class FieldReader {
 public:
  explicit FieldReader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw FormatError(source_, path + ": " + what);
  }
  const json& field(const json& object, const std::string& path, const char* name) const {
    if (!object.is_object()) fail(path, "expected an object");
    auto it = object.find(name);
    if (it == object.end()) fail(path + "." + name, "missing");
    return *it;
  }
  std::string string(const json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string");
    return v.get<std::string>();
  }
  int64_t integer(const json& v, const std::string& path, int64_t min, int64_t max) const {
    if (!v.is_number_integer()) fail(path, "expected an integer");
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max))
      fail(path, "out of range");
    const auto x = v.get<int64_t>();
    if (x < min || x > max)
      fail(path,
           std::to_string(x) + " is outside " + std::to_string(min) + ".." + std::to_string(max));
    return x;
  }
  uint64_t unsigned_integer(const json& v, const std::string& path) const {
    if (!v.is_number_unsigned()) fail(path, "expected a non-negative integer");
    return v.get<uint64_t>();
  }
  double number(const json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "expected a number");
    return v.get<double>();
  }
  bool boolean(const json& v, const std::string& path) const {
    if (!v.is_boolean()) fail(path, "expected true or false");
    return v.get<bool>();
  }
  const json& array(const json& v, const std::string& path) const {
    if (!v.is_array()) fail(path, "expected an array");
    return v;
  }

 private:
  const std::string& source_;
};

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

std::string too_large(uintmax_t bytes) {
  return "is " + std::to_string(bytes) + " bytes; a session file may hold at most " +
         std::to_string(kMaxSessionFileBytes >> 20) +
         " MiB (the whole file is read into memory to be checked before anything is stored)";
}

// The digest an export of `version` names an image by: XXH3-128 in version 1, SHA-256 since.
std::string export_digest(const std::vector<uint8_t>& bytes, int64_t version) {
  return version == 1 ? xxh3_128(bytes).hex() : image_digest(bytes).hex();
}

json settings_to_json(const SessionSettings& s) {
  return {{"model_fingerprint", s.model_fingerprint},
          {"effort", s.effort},
          {"thinking", s.thinking},
          {"system_prompt", s.system_prompt},
          {"temperature", s.sampling.temperature},
          {"top_p", s.sampling.top_p},
          {"seed", s.sampling.seed},
          {"max_new_tokens", s.max_new_tokens}};
}

json message_to_json(const ExportedMessage& e) {
  json attachments = json::array();
  for (const NewImage& image : e.message.images)
    attachments.push_back({{"digest", export_digest(image.bytes, kSessionFormatVersion)},
                           {"mime_type", image.mime_type},
                           {"data", base64_encode(image.bytes)}});
  return {{"role", to_string(e.message.role)},
          {"text", e.message.text},
          {"thinking", e.message.thinking},
          {"token_ids", e.message.token_ids},
          {"status", to_string(e.message.status)},
          {"thinking_ms", e.message.end.thinking_ms},
          {"stopped", e.message.end.stopped},
          {"created_ms", e.created_ms},
          {"updated_ms", e.updated_ms},
          {"attachments", std::move(attachments)}};
}

SessionSettings settings_from_json(const FieldReader& r, const json& j) {
  const std::string p = "settings";
  SessionSettings s;
  s.model_fingerprint = r.string(r.field(j, p, "model_fingerprint"), p + ".model_fingerprint");
  s.effort = static_cast<int>(r.integer(r.field(j, p, "effort"), p + ".effort", 1, 100));
  s.thinking = r.boolean(r.field(j, p, "thinking"), p + ".thinking");
  s.system_prompt = r.string(r.field(j, p, "system_prompt"), p + ".system_prompt");
  s.sampling.temperature =
      static_cast<float>(r.number(r.field(j, p, "temperature"), p + ".temperature"));
  s.sampling.top_p = static_cast<float>(r.number(r.field(j, p, "top_p"), p + ".top_p"));
  s.sampling.seed = r.unsigned_integer(r.field(j, p, "seed"), p + ".seed");
  s.max_new_tokens =
      r.integer(r.field(j, p, "max_new_tokens"), p + ".max_new_tokens", 1, kMaxInt64);
  try {
    s.validate();
  } catch (const InvalidRequest& e) {
    r.fail(p, e.what());
  }
  return s;
}

NewImage image_from_json(const FieldReader& r, const json& j, const std::string& p,
                         int64_t version) {
  const std::string digest = r.string(r.field(j, p, "digest"), p + ".digest");
  NewImage image;
  image.mime_type = r.string(r.field(j, p, "mime_type"), p + ".mime_type");
  if (image.mime_type.empty()) r.fail(p + ".mime_type", "empty");
  auto bytes = base64_decode(r.string(r.field(j, p, "data"), p + ".data"));
  if (!bytes) r.fail(p + ".data", "not valid base64");
  if (bytes->empty()) r.fail(p + ".data", "empty image");
  image.bytes = std::move(*bytes);
  const std::string computed = export_digest(image.bytes, version);
  if (computed != digest)
    r.fail(p + ".digest", std::string("does not match the data (") +
                              (version == 1 ? "XXH3-128 " : "SHA-256 ") + computed + ")");
  return image;
}

ExportedMessage message_from_json(const FieldReader& r, const json& j, const std::string& p,
                                  int64_t version) {
  ExportedMessage e;
  NewMessage& m = e.message;
  const auto role = parse_role(r.string(r.field(j, p, "role"), p + ".role"));
  if (!role) r.fail(p + ".role", "expected \"user\" or \"assistant\"");
  m.role = *role;
  m.text = r.string(r.field(j, p, "text"), p + ".text");
  m.thinking = r.string(r.field(j, p, "thinking"), p + ".thinking");
  const json& ids = r.array(r.field(j, p, "token_ids"), p + ".token_ids");
  for (size_t i = 0; i < ids.size(); ++i)
    m.token_ids.push_back(
        static_cast<TokenId>(r.integer(ids[i], p + ".token_ids[" + std::to_string(i) + "]", 0,
                                       std::numeric_limits<TokenId>::max())));
  const auto status = parse_status(r.string(r.field(j, p, "status"), p + ".status"));
  if (!status) r.fail(p + ".status", "expected \"complete\" or \"interrupted\"");
  m.status = *status;
  // Optional: exports of version 1 have neither.
  if (j.contains("thinking_ms"))
    m.end.thinking_ms = r.integer(j["thinking_ms"], p + ".thinking_ms", -1, kMaxInt64);
  if (j.contains("stopped")) m.end.stopped = r.boolean(j["stopped"], p + ".stopped");
  e.created_ms = r.integer(r.field(j, p, "created_ms"), p + ".created_ms", 0, kMaxInt64);
  e.updated_ms = r.integer(r.field(j, p, "updated_ms"), p + ".updated_ms", 0, kMaxInt64);
  const json& attachments = r.array(r.field(j, p, "attachments"), p + ".attachments");
  for (size_t i = 0; i < attachments.size(); ++i)
    m.images.push_back(
        image_from_json(r, attachments[i], p + ".attachments[" + std::to_string(i) + "]", version));
  return e;
}

}  // namespace

std::string session_to_json(const SessionExport& session) {
  json messages = json::array();
  for (const ExportedMessage& m : session.messages) messages.push_back(message_to_json(m));
  const json doc = {
      {"format", kSessionFormatName},     {"version", kSessionFormatVersion},
      {"title", session.title},           {"created_ms", session.created_ms},
      {"updated_ms", session.updated_ms}, {"settings", settings_to_json(session.settings)},
      {"messages", std::move(messages)}};
  // Invalid UTF-8 in stored text (it should not happen) is replaced rather than failing export.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

SessionExport session_from_json(std::string_view text, const std::string& source) {
  if (text.size() > kMaxSessionFileBytes) throw FormatError(source, too_large(text.size()));
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // syntax errors, and numbers too large for a double
    throw FormatError(source, std::string("not valid JSON: ") + e.what());
  }
  const FieldReader r(source);
  if (!doc.is_object()) r.fail("(top level)", "expected an object");
  if (r.string(r.field(doc, "", "format"), "format") != kSessionFormatName)
    r.fail("format", "expected \"flashdesk-session\"");
  const int64_t version = r.integer(r.field(doc, "", "version"), "version", 1, kMaxInt64);
  if (version > kSessionFormatVersion)
    r.fail("version", std::to_string(version) + " is newer than this FlashDesk reads (" +
                          std::to_string(kSessionFormatVersion) + ")");
  SessionExport s;
  s.title = r.string(r.field(doc, "", "title"), "title");
  s.created_ms = r.integer(r.field(doc, "", "created_ms"), "created_ms", 0, kMaxInt64);
  s.updated_ms = r.integer(r.field(doc, "", "updated_ms"), "updated_ms", 0, kMaxInt64);
  s.settings = settings_from_json(r, r.field(doc, "", "settings"));
  const json& messages = r.array(r.field(doc, "", "messages"), "messages");
  for (size_t i = 0; i < messages.size(); ++i)
    s.messages.push_back(
        message_from_json(r, messages[i], "messages[" + std::to_string(i) + "]", version));
  return s;
}

std::string read_session_file(const std::filesystem::path& file) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) throw IoError(file.string() + ": cannot read: " + ec.message());
  if (size > kMaxSessionFileBytes) throw FormatError(file.string(), too_large(size));
  const std::vector<uint8_t> bytes = read_whole_file(file);
  return {bytes.begin(), bytes.end()};
}

}  // namespace flashdesk::storage
