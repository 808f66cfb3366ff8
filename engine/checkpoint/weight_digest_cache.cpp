// Reading, matching and writing the weight digest cache (format in the header).
#include "engine/checkpoint/weight_digest_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <ctime>
#include <sstream>

#include "engine/util/error.h"
#include "engine/util/file_io.h"
#include "engine/util/xdg_dirs.h"

namespace flashdesk {
namespace {

constexpr std::string_view kHeader = "flashdesk-weight-digests 1";

std::optional<Sha256::Digest> digest_from_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  Sha256::Digest d{};
  for (size_t i = 0; i < d.size(); ++i) {
    unsigned v = 0;
    const auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, v, 16);
    if (ec != std::errc() || end != hex.data() + 2 * i + 2) return std::nullopt;
    d[i] = static_cast<uint8_t>(v);
  }
  return Sha256::hex(d) == hex ? std::optional(d) : std::nullopt;  // lower case only
}

template <typename T>
bool parse_number(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::vector<std::string_view> split_tabs(std::string_view line, size_t max_fields) {
  std::vector<std::string_view> fields;
  while (fields.size() + 1 < max_fields) {
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) break;
    fields.push_back(line.substr(0, tab));
    line.remove_prefix(tab + 1);
  }
  fields.push_back(line);  // the path, which may hold tabs
  return fields;
}

// The file's identity now, or nothing when it is gone.
std::optional<FileIdentity> current_identity(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<FileIdentity> id;
  try {
    id = file_identity(fd, path.c_str());
  } catch (const IoError&) {
  }
  ::close(fd);
  return id;
}

}  // namespace

std::filesystem::path default_weight_digest_cache() {
  try {
    return flashdesk_cache_dir() / "weight-digests.tsv";
  } catch (const IoError&) {
    return {};  // no home folder: no cache, every open hashes
  }
}

int64_t realtime_now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

WeightDigestCache WeightDigestCache::load(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return {};
  return parse(read_small_file(file, 16u << 20), file);
}

WeightDigestCache WeightDigestCache::parse(const std::string& text,
                                           const std::filesystem::path& file) {
  WeightDigestCache cache;
  std::istringstream in(text);
  std::string line;
  int64_t number = 0;
  auto fail = [&](const std::string& what) {
    throw FormatError(file.string(), "line " + std::to_string(number) + ": " + what);
  };
  while (std::getline(in, line)) {
    ++number;
    if (number == 1) {
      if (line != kHeader) fail("expected '" + std::string(kHeader) + "'");
      continue;
    }
    const auto f = split_tabs(line, 7);
    if (f.size() != 7) fail("expected 7 tab-separated fields, found " + std::to_string(f.size()));
    Entry e;
    const auto digest = digest_from_hex(f[0]);
    if (!digest) fail("'" + std::string(f[0]) + "' is not 64 lower-case hex digits");
    e.digest = *digest;
    if (!parse_number(f[1], e.id.size) || !parse_number(f[2], e.id.mtime_ns) ||
        !parse_number(f[3], e.id.ctime_ns) || !parse_number(f[4], e.id.device) ||
        !parse_number(f[5], e.id.inode))
      fail("size, times, device and inode must be whole numbers");
    e.path = std::string(f[6]);
    if (!e.path.is_absolute()) fail("'" + e.path.string() + "' is not an absolute path");
    cache.entries_.push_back(std::move(e));
  }
  if (number == 0)
    throw FormatError(file.string(), "empty file; expected '" + std::string(kHeader) + "'");
  return cache;
}

std::optional<Sha256::Digest> WeightDigestCache::find(const std::filesystem::path& path,
                                                      const FileIdentity& id) const {
  const std::filesystem::path key = std::filesystem::absolute(path);
  for (const Entry& e : entries_)
    if (e.path == key && e.id == id) return e.digest;
  return std::nullopt;
}

bool WeightDigestCache::put(const std::filesystem::path& path, const FileIdentity& id,
                            const Sha256::Digest& digest, int64_t hashing_started_ns) {
  const std::filesystem::path key = std::filesystem::absolute(path);
  if (key.native().find('\n') != std::string::npos) return false;  // a line per entry
  const int64_t newest = std::max(id.mtime_ns, id.ctime_ns);
  if (newest > hashing_started_ns - kRacyMarginNs) return false;
  std::erase_if(entries_, [&](const Entry& e) { return e.path == key; });
  entries_.push_back({key, id, digest});
  return true;
}

std::string WeightDigestCache::text() const {
  std::string out(kHeader);
  out += '\n';
  for (const Entry& e : entries_) {
    out += Sha256::hex(e.digest) + '\t' + std::to_string(e.id.size) + '\t' +
           std::to_string(e.id.mtime_ns) + '\t' + std::to_string(e.id.ctime_ns) + '\t' +
           std::to_string(e.id.device) + '\t' + std::to_string(e.id.inode) + '\t' +
           e.path.string() + '\n';
  }
  return out;
}

void WeightDigestCache::save(const std::filesystem::path& file) const {
  WeightDigestCache kept;
  for (const Entry& e : entries_)
    if (current_identity(e.path) == e.id) kept.entries_.push_back(e);
  if (kept.entries_.size() > kMaxEntries)
    kept.entries_.erase(kept.entries_.begin(),
                        kept.entries_.end() - static_cast<std::ptrdiff_t>(kMaxEntries));
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec)
    throw IoError("cannot create folder " + file.parent_path().string() + ": " + ec.message());
  write_file_atomic(file, kept.text());
}

}  // namespace flashdesk
