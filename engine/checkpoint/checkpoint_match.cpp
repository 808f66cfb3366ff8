// Expected-vs-found tensor comparison, reporting every difference by name.
#include "engine/checkpoint/checkpoint_match.h"

#include <unordered_map>

namespace flashdesk {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<std::string> tensor_problems(const std::vector<TensorSpec>& expected,
                                         const std::vector<FoundTensor>& found) {
  std::unordered_map<std::string_view, const FoundTensor*> by_name;
  for (const FoundTensor& f : found) by_name.emplace(f.entry->name, &f);
  std::vector<std::string> problems;
  std::unordered_map<std::string_view, bool> wanted;
  for (const TensorSpec& s : expected) {
    wanted.emplace(s.name, true);
    const auto it = by_name.find(s.name);
    const std::string want = std::string(dtype_name(s.dtype)) + " " + shape_string(s.shape);
    if (it == by_name.end()) {
      problems.push_back("missing " + s.name + " (" + want + ")");
      continue;
    }
    const SafetensorsEntry& e = *it->second->entry;
    if (e.dtype != s.dtype)
      problems.push_back("wrong dtype " + s.name + " in " + it->second->file + ": " +
                         std::string(dtype_name(e.dtype)) + ", expected " +
                         std::string(dtype_name(s.dtype)));
    if (e.shape != s.shape)
      problems.push_back("wrong shape " + s.name + " in " + it->second->file + ": " +
                         shape_string(e.shape) + ", expected " + shape_string(s.shape));
  }
  for (const FoundTensor& f : found)
    if (!wanted.contains(f.entry->name))
      problems.push_back("unexpected " + f.entry->name + " in " + f.file + " (" +
                         std::string(dtype_name(f.entry->dtype)) + " " +
                         shape_string(f.entry->shape) + ")");
  return problems;
}

}  // namespace flashdesk
