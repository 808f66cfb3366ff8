// Tokenizer encode throughput on one core over the parity corpus, against a plain UTF-8 decode
// pass over the same bytes measured in the same run.
//
// Usage: tokenizer_bench [TOKENIZER_JSON [CORPUS_DIR [RUNS]]]  (defaults: the DeepSeek-V3 test
// tokenizer and corpus of this source tree, 7 runs). Prints medians.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_timing.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/utf8.h"

namespace {

using flashdesk::bench::median;

namespace fs = std::filesystem;
using flashdesk::Tokenizer;

const fs::path kDataDir = fs::path(FD_SOURCE_DIR) / "tests/data/tokenizers";

std::vector<std::string> read_corpus(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> docs;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    docs.push_back(s.str());
  }
  return docs;
}

// CPU time of this thread: on a shared machine, time spent descheduled would swamp the numbers.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

template <class F>
double seconds(F&& f) {
  const double t0 = thread_seconds();
  f();
  return thread_seconds() - t0;
}

// A checksum keeps the compiler from dropping the work being timed.
size_t utf8_pass(const std::vector<std::string>& docs) {
  size_t sum = 0;
  for (const auto& d : docs)
    for (size_t i = 0; i < d.size();) {
      const auto u = flashdesk::utf8::decode(d, i);
      sum += u.cp;
      i += u.size;
    }
  return sum;
}

size_t pre_tokenize_pass(const flashdesk::PreTokenizerSpec& spec,
                         const std::vector<std::string>& docs) {
  flashdesk::PreTokenizerScratch scratch;
  std::vector<flashdesk::Piece> pieces;
  size_t n = 0;
  for (const auto& d : docs) {
    pieces.clear();
    flashdesk::pre_tokenize(spec, d, scratch, pieces);
    n += pieces.size();
  }
  return n;
}

size_t encode_pass(const Tokenizer& tok, const std::vector<std::string>& docs) {
  size_t n = 0;
  for (const auto& d : docs) n += tok.encode(d).size();
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path tokenizer_path =
      argc > 1 ? fs::path(argv[1]) : kDataDir / "deepseek-v3/tokenizer.json";
  const fs::path corpus_dir = argc > 2 ? fs::path(argv[2]) : kDataDir / "corpus";
  const int runs = argc > 3 ? std::max(1, std::atoi(argv[3])) : 7;

  const auto docs = read_corpus(corpus_dir);
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  std::ifstream in(tokenizer_path, std::ios::binary);
  std::ostringstream json;
  json << in.rdbuf();
  std::string text = json.str();

  std::vector<Tokenizer> loaded;
  const double load_s =
      seconds([&] { loaded.push_back(Tokenizer::from_json(text, tokenizer_path.string())); });
  const Tokenizer& tok = loaded.front();
  const auto spec = flashdesk::parse_tokenizer_json(text, tokenizer_path.string()).pre_tokenizer;

  size_t tokens = 0, sink = 0;
  const double cold_s = seconds([&] { tokens = encode_pass(tok, docs); });
  std::vector<double> t_utf8, t_split, t_encode;
  for (int r = 0; r < runs; ++r) {
    t_utf8.push_back(seconds([&] { sink += utf8_pass(docs); }));
    t_split.push_back(seconds([&] { sink += pre_tokenize_pass(spec, docs); }));
    t_encode.push_back(seconds([&] { sink += encode_pass(tok, docs); }));
  }
  const double mb = bytes / 1e6, base = mb / median(t_utf8);
  std::printf("tokenizer %s: loaded in %.0f ms\n", tokenizer_path.filename().c_str(), load_s * 1e3);
  std::printf(
      "corpus: %zu documents, %zu bytes, %zu tokens (%.2f bytes/token); %d runs, one core\n\n",
      docs.size(), bytes, tokens, double(bytes) / tokens, runs);
  std::printf("| pass                          | MB/s (median) | ratio to UTF-8 decode |\n");
  std::printf("|-------------------------------|--------------:|----------------------:|\n");
  const auto row = [&](const char* name, double mbps) {
    std::printf("| %-29s | %13.1f | %21.3f |\n", name, mbps, mbps / base);
  };
  row("UTF-8 decode (baseline)", base);
  row("pre-tokenize only", mb / median(t_split));
  row("encode, first pass (cold)", mb / cold_s);
  row("encode (warm word cache)", mb / median(t_encode));
  std::printf("\n(checksum %zu)\n", sink);
  return 0;
}
