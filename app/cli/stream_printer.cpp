// Terminal and pipe rendering of streamed reasoning and answers.
#include "app/cli/stream_printer.h"

namespace flashdesk::cli {
namespace {
constexpr const char* kDim = "\x1b[2m";
constexpr const char* kReset = "\x1b[0m";
}  // namespace

StreamCallbacks StreamPrinter::callbacks() {
  StreamCallbacks c;
  c.on_text = [this](StreamChannel channel, std::string_view text) { print(channel, text); };
  return c;
}

void StreamPrinter::print(StreamChannel channel, std::string_view text) {
  const bool thinking = channel == StreamChannel::kThinking;
  if (thinking && !in_thinking_) {
    std::fputs(terminal_ ? kDim : "[thinking] ", out_);
    in_thinking_ = true;
  } else if (!thinking && in_thinking_) {
    std::fputs(terminal_ ? kReset : "", out_);
    std::fputs("\n", out_);
    in_thinking_ = false;
  }
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
  printed_ = true;
}

void StreamPrinter::finish() {
  if (in_thinking_ && terminal_) std::fputs(kReset, out_);
  if (printed_) std::fputs("\n", out_);
  std::fflush(out_);
  in_thinking_ = printed_ = false;
}

}  // namespace flashdesk::cli
