// `flashdesk-cli tokenize`: text on stdin -> ids on stdout (or ids -> text with --decode), for
// scripts and for checking our tokenizer against other implementations.
#include <cxxopts.hpp>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/util/error.h"

namespace flashdesk::cli {
namespace {

std::string read_stdin() {
  std::ios::sync_with_stdio(false);
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

std::vector<TokenId> parse_ids(const std::string& text) {
  std::vector<TokenId> ids;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    if (std::isspace(static_cast<unsigned char>(*p))) {
      ++p;
      continue;
    }
    TokenId id = 0;
    const auto [next, ec] = std::from_chars(p, end, id);
    if (ec != std::errc() || (next < end && !std::isspace(static_cast<unsigned char>(*next))))
      throw InvalidRequest("--decode expects whitespace-separated token ids, got \"" +
                           std::string(p, std::min<size_t>(end - p, 20)) + "\"");
    ids.push_back(id);
    p = next;
  }
  return ids;
}

}  // namespace

int run_tokenize(int argc, char** argv) {
  cxxopts::Options options("flashdesk-cli tokenize",
                           "Encode stdin to token ids, or decode ids on stdin to text");
  options.add_options()("tokenizer", "tokenizer.json to use", cxxopts::value<std::string>())(
      "decode", "read ids, print text")("plain", "encode added-token spellings as plain text")(
      "skip-special", "leave special tokens out when decoding")("h,help", "show this help");
  const auto args = options.parse(argc, argv);
  if (args.count("help")) {
    std::printf("%s", options.help().c_str());
    return 0;
  }
  if (!args.count("tokenizer")) throw InvalidRequest("tokenize needs --tokenizer FILE");
  const Tokenizer tokenizer = Tokenizer::from_file(args["tokenizer"].as<std::string>());
  const std::string input = read_stdin();
  if (args.count("decode")) {
    const std::string text =
        tokenizer.decode(parse_ids(input), {.skip_special = args.count("skip-special") > 0});
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  const auto ids = tokenizer.encode(input, {.match_added_tokens = args.count("plain") == 0});
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  line += "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  return 0;
}

}  // namespace flashdesk::cli
