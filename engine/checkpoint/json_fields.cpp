// Typed JSON field reads with errors that name the file and the field.
#include "engine/checkpoint/json_fields.h"

#include <cmath>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

using nlohmann::json;

std::string type_name(const json& v) {
  return v.type_name();
}

// Thrown from the parser callback to stop at excessive depth; converted to FormatError below.
struct TooDeep {};

}  // namespace

json parse_json_text(std::string_view text, const std::string& file, int max_depth) {
  const json::parser_callback_t limit_depth = [max_depth](int depth, json::parse_event_t,
                                                          json&) -> bool {
    if (depth > max_depth) throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit_depth);
  } catch (const TooDeep&) {
    throw FormatError(file, "invalid JSON: nested deeper than " + std::to_string(max_depth));
  } catch (const json::parse_error& e) {
    throw FormatError(file, "invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  }
}

JsonFields::JsonFields(const json& obj, std::string prefix, const std::string& file)
    : obj_(obj), prefix_(std::move(prefix)), file_(file) {
  if (!obj_.is_object())
    throw FormatError(file_, (prefix_.empty() ? std::string("top level") : prefix_) +
                                 ": expected a JSON object, found " + type_name(obj_));
}

std::string JsonFields::path(const char* key) const {
  return prefix_.empty() ? std::string(key) : prefix_ + "." + key;
}

const json* JsonFields::find(const char* key) const {
  const auto it = obj_.find(key);
  return it == obj_.end() ? nullptr : &*it;
}

int64_t JsonFields::to_int(const json& v, const std::string& where) const {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})
      throw FormatError(file_, where + ": integer out of range");
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= 9007199254740992.0)
      return static_cast<int64_t>(d);
  }
  throw FormatError(file_,
                    where + ": expected an integer, found " +
                        (v.is_number() ? std::string("a non-integral number") : type_name(v)));
}

void JsonFields::read(const char* key, int64_t& out) const {
  if (const json* v = find(key)) out = to_int(*v, path(key));
}

void JsonFields::read(const char* key, double& out) const {
  const json* v = find(key);
  if (v == nullptr) return;
  if (!v->is_number())
    throw FormatError(file_, path(key) + ": expected a number, found " + type_name(*v));
  out = v->get<double>();
  if (!std::isfinite(out)) throw FormatError(file_, path(key) + ": not a finite number");
}

void JsonFields::read(const char* key, bool& out) const {
  const json* v = find(key);
  if (v == nullptr) return;
  if (!v->is_boolean())
    throw FormatError(file_, path(key) + ": expected true or false, found " + type_name(*v));
  out = v->get<bool>();
}

void JsonFields::read(const char* key, std::string& out) const {
  const json* v = find(key);
  if (v == nullptr) return;
  if (!v->is_string())
    throw FormatError(file_, path(key) + ": expected a string, found " + type_name(*v));
  out = v->get<std::string>();
}

void JsonFields::read(const char* key, std::vector<int64_t>& out) const {
  const json* v = find(key);
  if (v == nullptr) return;
  if (!v->is_array())
    throw FormatError(file_, path(key) + ": expected an array of integers, found " + type_name(*v));
  std::vector<int64_t> values;
  values.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i)
    values.push_back(to_int((*v)[i], path(key) + "[" + std::to_string(i) + "]"));
  out = std::move(values);
}

void JsonFields::read(const char* key, std::vector<std::string>& out) const {
  const json* v = find(key);
  if (v == nullptr) return;
  if (!v->is_array())
    throw FormatError(file_, path(key) + ": expected an array of strings, found " + type_name(*v));
  std::vector<std::string> values;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string())
      throw FormatError(file_, path(key) + "[" + std::to_string(i) + "]: expected a string");
    values.push_back((*v)[i].get<std::string>());
  }
  out = std::move(values);
}

void JsonFields::read(const char* key, std::optional<int64_t>& out) const {
  const json* v = find(key);
  if (v == nullptr) return;
  if (v->is_null()) {
    out.reset();
    return;
  }
  out = to_int(*v, path(key));
}

void JsonFields::read(const char* key, std::optional<double>& out) const {
  const json* v = find(key);
  if (v == nullptr) return;
  if (v->is_null()) {
    out.reset();
    return;
  }
  double d = 0;
  read(key, d);
  out = d;
}

const json* JsonFields::object(const char* key) const {
  const json* v = find(key);
  if (v == nullptr || v->is_null()) return nullptr;
  if (!v->is_object())
    throw FormatError(file_, path(key) + ": expected an object, found " + type_name(*v));
  return v;
}

}  // namespace flashdesk
