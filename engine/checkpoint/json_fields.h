// Typed reads of JSON object fields for the config and index parsers: a missing field keeps the
// caller's default, a field of the wrong type is a FormatError naming the file and the field path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashdesk {

// Parses JSON text; a syntax error, or nesting deeper than max_depth (a guard against stack
// exhaustion on hostile input), is a FormatError naming `file` and the byte offset.
nlohmann::json parse_json_text(std::string_view text, const std::string& file, int max_depth = 64);

class JsonFields {
 public:
  // `obj` must outlive this reader; `prefix` is the path of obj in the file ("text_config").
  JsonFields(const nlohmann::json& obj, std::string prefix, const std::string& file);

  // Each read leaves `out` unchanged when the key is absent.
  void read(const char* key, int64_t& out) const;  // integer (an integral float is accepted)
  void read(const char* key, double& out) const;   // any finite number
  void read(const char* key, bool& out) const;
  void read(const char* key, std::string& out) const;
  void read(const char* key, std::vector<int64_t>& out) const;
  void read(const char* key, std::vector<std::string>& out) const;
  void read(const char* key, std::optional<int64_t>& out) const;  // null -> nullopt
  void read(const char* key, std::optional<double>& out) const;   // null -> nullopt

  // The nested object at `key`, or nullptr when absent or null; a non-object is an error.
  const nlohmann::json* object(const char* key) const;
  bool has(const char* key) const { return obj_.contains(key); }
  // "prefix.key": how errors name a field.
  std::string path(const char* key) const;
  const std::string& file() const { return file_; }

 private:
  const nlohmann::json* find(const char* key) const;
  int64_t to_int(const nlohmann::json& v, const std::string& where) const;

  const nlohmann::json& obj_;
  std::string prefix_;
  const std::string& file_;
};

}  // namespace flashdesk
