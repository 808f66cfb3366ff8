// The V4.1 chat format: message layout as segments, then segments to ids (see chat_template.h).
#include "engine/tokenizer/chat_template.h"

#include <algorithm>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

// A prompt before tokenization: special tokens, text, verbatim ids and images, in order.
struct Segment {
  enum class Kind { kSpecial, kText, kIds, kImage } kind;
  TokenId id = 0;                             // kSpecial
  std::string_view spelling;                  // kSpecial, for render_text
  std::string text;                           // kText; kIds: the text the ids stand for
  const std::vector<TokenId>* ids = nullptr;  // kIds
  ImageGrid grid;                             // kImage
};

// Largest image grid accepted: far beyond the 1024-token budget of docs/model-spec.md §8, but it
// keeps a bad request from allocating gigabytes.
constexpr int kMaxGridSide = 4096;

class Layout {
 public:
  Layout(const SpecialTokenIds& special, const ChatOptions& options)
      : sp_(special), opt_(options) {}

  std::vector<Segment> run(std::span<const ChatMessage> messages) {
    special(sp_.bos, spelling::kBos);
    last_user_ = last_user_index(messages);
    for (size_t i = 0; i < messages.size(); ++i) {
      message(messages, i);
      transition(messages, i);
    }
    return std::move(out_);
  }

 private:
  bool thinking() const { return opt_.mode == ThinkingMode::kThinking; }

  // The last message a generation answers: a user message, or a system message after the first.
  static std::ptrdiff_t last_user_index(std::span<const ChatMessage> messages) {
    for (size_t i = messages.size(); i-- > 0;)
      if (messages[i].role == Role::kUser || (messages[i].role == Role::kSystem && i > 0))
        return static_cast<std::ptrdiff_t>(i);
    return -1;
  }

  void message(std::span<const ChatMessage> messages, size_t i) {
    const ChatMessage& m = messages[i];
    if (i == 0 && (thinking() || m.role == Role::kSystem)) special(sp_.system, spelling::kSystem);
    if (i == 0 && thinking()) text(reasoning_effort_line(opt_.effort) + "\n\n");
    switch (m.role) {
      case Role::kSystem:
        if (i > 0) special(sp_.system, spelling::kSystem);
        parts(m, "system");
        break;
      case Role::kUser:
        special(sp_.user, spelling::kUser);
        parts(m, "user");
        break;
      case Role::kAssistant:
        assistant(m, static_cast<std::ptrdiff_t>(i));
        break;
    }
  }

  void assistant(const ChatMessage& m, std::ptrdiff_t i) {
    // Its header said <think> exactly when its reasoning is kept (see header()).
    if (thinking() && (opt_.keep_reasoning || i > last_user_)) {
      ids_or_text(m.reasoning_ids, m.reasoning);
      special(sp_.think_end, spelling::kThinkEnd);
    }
    parts(m, "assistant");
    if (m.content_ids) out_.back().kind = Segment::Kind::kIds, out_.back().ids = &*m.content_ids;
    special(sp_.eos, spelling::kEos);
  }

  // The assistant header after message i, when an answer to it follows or is to be generated.
  void transition(std::span<const ChatMessage> messages, size_t i) {
    const bool last = i + 1 == messages.size();
    if (last && !opt_.add_generation_prompt) return;
    if (!last && messages[i + 1].role != Role::kAssistant) return;
    const Role role = messages[i].role;
    const bool answers = role == Role::kUser || (role == Role::kSystem && i > 0) || last;
    if (!answers) return;
    special(sp_.assistant, spelling::kAssistant);
    const bool open_thinking =
        thinking() && (opt_.keep_reasoning || static_cast<std::ptrdiff_t>(i) >= last_user_);
    if (open_thinking)
      special(sp_.think_begin, spelling::kThinkBegin);
    else
      special(sp_.think_end, spelling::kThinkEnd);
  }

  void parts(const ChatMessage& m, const char* role) {
    std::string joined;
    for (size_t k = 0; k < m.content.size(); ++k) {
      const ContentPart& part = m.content[k];
      if (k > 0) joined += "\n\n";
      if (part.kind == ContentPart::Kind::kText) {
        joined += part.text;
        continue;
      }
      if (m.role != Role::kUser)
        throw InvalidRequest(std::string("an image in a ") + role + " message");
      check_grid(part.grid);
      text(std::move(joined));
      joined.clear();
      out_.push_back(
          Segment{Segment::Kind::kImage, sp_.image, spelling::kImage, {}, nullptr, part.grid});
    }
    text(std::move(joined));
  }

  void ids_or_text(const std::optional<std::vector<TokenId>>& ids, const std::string& s) {
    text(s);
    if (ids) out_.back().kind = Segment::Kind::kIds, out_.back().ids = &*ids;
  }

  static void check_grid(const ImageGrid& g) {
    if (g.rows < 1 || g.cols < 1 || g.rows > kMaxGridSide || g.cols > kMaxGridSide)
      throw InvalidRequest("image grid " + std::to_string(g.rows) + "x" + std::to_string(g.cols) +
                           " is not 1..4096 on each side");
  }

  void special(TokenId id, std::string_view s) {
    out_.push_back(Segment{Segment::Kind::kSpecial, id, s, {}, nullptr, {}});
  }
  void text(std::string s) {
    out_.push_back(Segment{Segment::Kind::kText, 0, {}, std::move(s), nullptr, {}});
  }

  const SpecialTokenIds& sp_;
  const ChatOptions& opt_;
  std::ptrdiff_t last_user_ = -1;
  std::vector<Segment> out_;
};

void append_image(const SpecialTokenIds& sp, const ImageGrid& grid, RenderedPrompt& out) {
  ImageSpan span{out.ids.size(), 0, grid};
  out.ids.insert(out.ids.end(), grid.token_count(), sp.image);
  span.end = out.ids.size();
  out.images.push_back(span);
}

}  // namespace

ChatMessage ChatMessage::system(std::string text) {
  return ChatMessage{Role::kSystem, {ContentPart::of_text(std::move(text))}, {}, {}, {}};
}
ChatMessage ChatMessage::user(std::string text) {
  return ChatMessage{Role::kUser, {ContentPart::of_text(std::move(text))}, {}, {}, {}};
}
ChatMessage ChatMessage::assistant(std::string content, std::string reasoning) {
  return ChatMessage{
      Role::kAssistant, {ContentPart::of_text(std::move(content))}, std::move(reasoning), {}, {}};
}

ChatMessage ChatMessage::of_parts(Role role, std::vector<ContentPart> parts) {
  return ChatMessage{role, std::move(parts), {}, {}, {}};
}

ChatTemplate::ChatTemplate(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer), special_(SpecialTokenIds::from(tokenizer)) {}

RenderedPrompt ChatTemplate::render(std::span<const ChatMessage> messages,
                                    const ChatOptions& options) const {
  const std::vector<Segment> segments = Layout(special_, options).run(messages);
  RenderedPrompt out;
  std::string pending;  // adjacent text is encoded as one string, as the reference encodes it all
  const auto flush = [&] {
    const size_t before = out.ids.size();
    tokenizer_.encode_into(pending, out.ids);
    pending.clear();
    if (std::find(out.ids.begin() + before, out.ids.end(), special_.image) != out.ids.end())
      throw InvalidRequest(
          "message text spells the image placeholder; attach images as image parts");
  };
  for (const Segment& s : segments) {
    if (s.kind == Segment::Kind::kText) {
      pending += s.text;
      out.text += s.text;
      continue;
    }
    flush();
    if (s.kind == Segment::Kind::kSpecial) out.ids.push_back(s.id);
    if (s.kind == Segment::Kind::kIds) {
      out.ids.insert(out.ids.end(), s.ids->begin(), s.ids->end());
      out.text += tokenizer_.decode(*s.ids);
    } else {
      out.text += s.spelling;
    }
    if (s.kind == Segment::Kind::kImage) append_image(special_, s.grid, out);
  }
  flush();
  return out;
}

std::string ChatTemplate::render_text(std::span<const ChatMessage> messages,
                                      const ChatOptions& options) const {
  std::string out;
  for (const Segment& s : Layout(special_, options).run(messages))
    out += (s.kind == Segment::Kind::kSpecial || s.kind == Segment::Kind::kImage)
               ? std::string(s.spelling)
               : s.text;
  return out;
}

}  // namespace flashdesk
