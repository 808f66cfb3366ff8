// Checkpoint::open: config, shard files, tensor table, validation and the fingerprint.
#include "engine/checkpoint/checkpoint.h"

#include <charconv>
#include <filesystem>
#include <unordered_map>

#include "engine/checkpoint/checkpoint_match.h"
#include "engine/checkpoint/engram_map.h"
#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/shard_index.h"
#include "engine/util/error.h"
#include "engine/util/file_io.h"
#include "engine/util/kv_numerics_version.h"
#include "engine/util/sha256.h"

namespace flashdesk {
namespace {

struct TableEntry {
  const SafetensorsEntry* entry;
  const SafetensorsFile* file;
};

std::string join_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += "\n  " + l;
  return s;
}

// "20,21" -> {20, 21}; FormatError on anything else.
std::vector<int64_t> parse_layer_list(const std::string& text, const std::string& file) {
  std::vector<int64_t> layers;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    int64_t v = -1;
    const auto [next, ec] = std::from_chars(p, end, v);
    if (ec != std::errc() || v < 0 || (next != end && *next != ','))
      throw FormatError(file, "__metadata__." + std::string(kPartialLayersKey) + ": '" + text +
                                  "' is not a comma-separated list of layer ids");
    layers.push_back(v);
    p = next == end ? end : next + 1;
  }
  return layers;
}

class CheckpointImpl final : public Checkpoint {
 public:
  CheckpointImpl(const std::filesystem::path& dir, const CheckpointOptions& options);

  const std::filesystem::path& dir() const override { return dir_; }
  const ModelConfig& config() const override { return config_; }
  const std::vector<LayerRole>& roles() const override { return roles_; }
  bool has(std::string_view name) const override { return table_.contains(name); }
  TensorView tensor(std::string_view name) const override;
  TensorSpec tensor_spec(std::string_view name) const override;
  std::vector<std::string> tensor_names() const override { return names_; }
  std::string fingerprint() const override { return fingerprint_; }
  const WeightDigestReport& weight_digest_report() const override { return digest_report_; }
  const std::vector<int64_t>& partial_layers() const override { return partial_layers_; }
  std::span<const int64_t> engram_token_map() const override { return engram_map_; }
  std::vector<std::filesystem::path> files() const override;

 private:
  void map_shards();
  void read_partial_marker(const CheckpointOptions& options);
  void build_table();
  void compute_fingerprint(const std::filesystem::path& digest_cache);

  std::filesystem::path dir_;
  uint64_t copy_limit_ = kDefaultCopyLimit;
  std::string config_text_;
  ModelConfig config_;
  std::vector<LayerRole> roles_;
  ShardIndex index_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::unique_ptr<SafetensorsFile> engram_file_;
  std::vector<int64_t> engram_map_;
  std::vector<int64_t> partial_layers_;
  std::unordered_map<std::string_view, TableEntry> table_;
  std::vector<std::string> names_;
  std::string fingerprint_;
  WeightDigestReport digest_report_;
};

CheckpointImpl::CheckpointImpl(const std::filesystem::path& dir, const CheckpointOptions& options)
    : dir_(dir), copy_limit_(options.copy_files_up_to) {
  const auto config_path = dir / "config.json";
  config_text_ = read_small_file(config_path);
  config_ = parse_model_config(config_text_, config_path.string());
  if (config_.name.empty()) config_.name = std::filesystem::absolute(dir).filename().string();
  roles_ = derive_layer_roles(config_.text);
  index_ = find_shards(dir);
  map_shards();
  read_partial_marker(options);
  build_table();
  const auto engram_path = dir / kEngramMapFile;
  if (std::filesystem::exists(engram_path)) {
    engram_map_ = load_engram_token_map(engram_path, config_.text);
    engram_file_ = std::make_unique<SafetensorsFile>(engram_path, copy_limit_);
  }
  compute_fingerprint(options.digest_cache);
}

void CheckpointImpl::map_shards() {
  for (const std::string& name : index_.shards)
    shards_.push_back(std::make_unique<SafetensorsFile>(dir_ / name, copy_limit_));
}

void CheckpointImpl::read_partial_marker(const CheckpointOptions& options) {
  std::optional<std::string> marker;
  for (const auto& shard : shards_) {
    const auto it = shard->metadata().find(std::string(kPartialLayersKey));
    const std::optional<std::string> here =
        it == shard->metadata().end() ? std::nullopt : std::optional(it->second);
    if (&shard != &shards_.front() && here != marker)
      throw FormatError(shard->path().string(), "__metadata__." + std::string(kPartialLayersKey) +
                                                    " differs from the first shard's");
    marker = here;
  }
  if (!marker) return;
  const std::string first = shards_.front()->path().string();
  partial_layers_ = parse_layer_list(*marker, first);
  std::vector<int64_t> closure;
  try {
    closure = partial_layer_closure(config_, partial_layers_);
  } catch (const InvalidRequest& e) {
    throw FormatError(first, "__metadata__." + std::string(kPartialLayersKey) + ": " + e.what());
  }
  if (closure != partial_layers_)
    throw FormatError(first,
                      "__metadata__." + std::string(kPartialLayersKey) + ": '" + *marker +
                          "' is not an ascending list closed over KV/index/candidate sources");
  if (!options.allow_partial)
    throw FormatError(dir_.string(), "a partial checkpoint holding only layers " + *marker +
                                         " (make-random --layers); open it with allow_partial");
}

void CheckpointImpl::build_table() {
  std::vector<std::string> problems;
  std::vector<FoundTensor> found;
  for (const auto& shard : shards_) {
    const std::string file = shard->path().filename().string();
    for (const SafetensorsEntry& e : shard->tensors()) {
      if (!index_.weight_map.empty()) {
        const auto it = index_.weight_map.find(e.name);
        if (it == index_.weight_map.end() || it->second != file)
          problems.push_back("tensor " + e.name + " is in " + file + " but the index says " +
                             (it == index_.weight_map.end() ? "nothing" : it->second));
      }
      if (!table_.emplace(e.name, TableEntry{&e, shard.get()}).second)
        problems.push_back("tensor " + e.name + " appears in more than one shard (again in " +
                           file + ")");
      found.push_back({&e, file});
    }
  }
  for (const auto& [name, file] : index_.weight_map)
    if (!table_.contains(name))
      problems.push_back("index lists " + name + " in " + file + ", which does not hold it");
  const std::vector<TensorSpec> expected = partial_layers_.empty()
                                               ? expected_tensors(config_)
                                               : expected_partial_tensors(config_, partial_layers_);
  for (std::string& p : tensor_problems(expected, found)) problems.push_back(std::move(p));
  if (!problems.empty())
    throw FormatError(dir_.string(), "checkpoint does not match config.json (" +
                                         std::to_string(problems.size()) +
                                         " problems):" + join_lines(problems));
  for (const TensorSpec& s : expected) names_.push_back(s.name);
}

// SHA-256 over: a version tag, kKvNumericsVersion, config.json's bytes, then for each safetensors
// file in order (shards sorted by name, then the Engram map): its name, size, header bytes and
// content digest; for an Engram model without the map, tokenizer.json's size and SHA-256 (its
// bytes decide every hash). Lengths and numbers are 8-byte little-endian.
void CheckpointImpl::compute_fingerprint(const std::filesystem::path& digest_cache) {
  std::vector<const SafetensorsFile*> files;
  for (const auto& shard : shards_) files.push_back(shard.get());
  if (engram_file_) files.push_back(engram_file_.get());
  std::vector<const MappedFile*> held;
  for (const SafetensorsFile* f : files) held.push_back(&f->file());
  const WeightDigests weights = digest_weight_files(held, digest_cache);
  digest_report_ = weights.report;
  Sha256 h;
  h.update("flashdesk-checkpoint-fingerprint-v2\n");
  h.update_u64(kKvNumericsVersion);
  h.update_u64(config_text_.size());
  h.update(config_text_);
  for (size_t i = 0; i < files.size(); ++i) {
    const SafetensorsFile& f = *files[i];
    const std::string name = f.path().filename().string();
    h.update_u64(name.size());
    h.update(name);
    h.update_u64(f.size());
    h.update_u64(f.header_bytes().size());
    h.update(f.header_bytes());
    h.update(weights.digests[i]);
  }
  const auto tokenizer = dir_ / "tokenizer.json";
  if (!engram_file_ && !config_.text.engram_layer_ids.empty() &&
      std::filesystem::exists(tokenizer)) {
    const std::string text = read_small_file(tokenizer);
    Sha256 t;
    t.update(text);
    h.update("tokenizer.json");
    h.update_u64(text.size());
    h.update(Sha256::hex(t.finish()));
  }
  fingerprint_ = Sha256::hex(h.finish());
}

TensorView CheckpointImpl::tensor(std::string_view name) const {
  const auto it = table_.find(name);
  FD_CHECK(it != table_.end(),
           "no tensor " + std::string(name) + " in checkpoint " + dir_.string());
  const SafetensorsEntry& e = *it->second.entry;
  return TensorView{e.name, e.dtype, e.shape, it->second.file->data(e),
                    static_cast<size_t>(e.nbytes)};
}

TensorSpec CheckpointImpl::tensor_spec(std::string_view name) const {
  const auto it = table_.find(name);
  FD_CHECK(it != table_.end(),
           "no tensor " + std::string(name) + " in checkpoint " + dir_.string());
  const SafetensorsEntry& e = *it->second.entry;
  return TensorSpec{e.name, e.dtype, e.shape};
}

std::vector<std::filesystem::path> CheckpointImpl::files() const {
  std::vector<std::filesystem::path> out;
  for (const auto& shard : shards_) out.push_back(shard->path());
  if (engram_file_) out.push_back(engram_file_->path());
  return out;
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open(const std::filesystem::path& dir,
                                             const CheckpointOptions& options) {
  return std::make_unique<CheckpointImpl>(dir, options);
}

}  // namespace flashdesk
