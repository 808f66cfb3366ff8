// Loading, running and scoring the demo eval items.
#include "engine/runtime/demo_eval.h"

#include <cctype>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/util/error.h"

namespace flashdesk {
namespace {

using nlohmann::json;

std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  for (unsigned char ch : text) {
    // Non-ASCII bytes count as word characters, as Python's str.isalnum() does for letters.
    if (std::isalnum(ch) || ch >= 0x80) {
      word.push_back(static_cast<char>(std::tolower(ch)));
    } else if (!word.empty()) {
      out.push_back(std::move(word));
      word.clear();
    }
  }
  if (!word.empty()) out.push_back(std::move(word));
  return out;
}

bool contains_words(const std::vector<std::string>& hay, const std::string& value) {
  const auto needle = words(value);
  if (needle.empty() || needle.size() > hay.size()) return false;
  for (size_t i = 0; i + needle.size() <= hay.size(); ++i)
    if (std::equal(needle.begin(), needle.end(), hay.begin() + static_cast<std::ptrdiff_t>(i)))
      return true;
  return false;
}

std::string strip(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

Role parse_role(const std::string& role) {
  if (role == "system") return Role::kSystem;
  if (role == "user") return Role::kUser;
  if (role == "assistant") return Role::kAssistant;
  throw InvalidRequest("unknown role '" + role + "'");
}

ChatMessage parse_message(const json& m, std::vector<std::string>& images) {
  const Role role = parse_role(m.at("role").get<std::string>());
  const json& content = m.at("content");
  std::vector<ContentPart> parts;
  if (content.is_string()) {
    parts.push_back(ContentPart::of_text(content.get<std::string>()));
  } else {
    for (const json& p : content) {
      if (p.at("type") == "image") {
        images.push_back(p.at("path").get<std::string>());
        parts.push_back(ContentPart::of_image(ImageGrid{1, 1}));  // real grid set by vision
      } else {
        parts.push_back(ContentPart::of_text(p.at("text").get<std::string>()));
      }
    }
  }
  ChatMessage msg = ChatMessage::of_parts(role, std::move(parts));
  if (m.contains("thinking") && m["thinking"].is_string()) msg.reasoning = m["thinking"];
  return msg;
}

std::string cell_of(const EvalItem& item, const json& meta) {
  // "cell_group" keeps items asked another way in rows of their own ("recall wording 500").
  if (item.task == "recall")
    return meta.value("cell_group", std::string("recall")) + " " +
           std::to_string(meta.value("distance_bucket", int64_t{0}));
  if (item.task == "arithmetic")
    return meta.value("op", std::string("?")) + " e" + std::to_string(item.effort);
  if (item.task == "image") return "image " + meta.value("question_kind", std::string("?"));
  if (item.task == "copy") return "copy " + meta.value("kind", std::string("?"));
  return item.task;
}

EvalItem parse_item(const json& j) {
  EvalItem item;
  item.id = j.at("id").get<std::string>();
  item.task = j.at("task").get<std::string>();
  item.mode = j.at("mode") == "thinking" ? ThinkingMode::kThinking : ThinkingMode::kChat;
  item.effort = j.at("effort").get<int>();
  for (const json& m : j.at("messages"))
    item.messages.push_back(parse_message(m, item.image_paths));
  item.prompt_text = j.at("prompt_text").get<std::string>();
  item.expected = j.at("expected").get<std::string>();
  item.match = j.value("match", std::string("contains"));
  for (const json& d : j.value("distractors", json::array())) item.distractors.push_back(d);
  item.cell = cell_of(item, j.value("meta", json::object()));
  const json reference = j.value("reference", json::object());
  if (reference.is_object()) item.reference_thinking = reference.value("thinking", std::string());
  return item;
}

}  // namespace

std::vector<EvalItem> load_eval_items(const std::filesystem::path& jsonl) {
  std::ifstream in(jsonl);
  if (!in) throw IoError("cannot open " + jsonl.string());
  return parse_eval_items(in, jsonl);
}

std::vector<EvalItem> parse_eval_items(std::istream& in, const std::filesystem::path& jsonl) {
  std::vector<EvalItem> items;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    try {
      items.push_back(parse_item(json::parse(line)));
      for (std::string& path : items.back().image_paths)  // relative to the data directory
        if (std::filesystem::path(path).is_relative()) path = (jsonl.parent_path() / path).string();
    } catch (const std::exception& e) {
      throw FormatError(jsonl.string(), "line " + std::to_string(line_no) + ": " + e.what());
    }
  }
  return items;
}

bool score_answer(const std::string& expected, const std::string& answer, const std::string& match,
                  const std::vector<std::string>& distractors) {
  if (match == "exact") return strip(answer) == expected;
  const auto hay = words(answer);
  if (!contains_words(hay, expected)) return false;
  for (const auto& d : distractors)
    if (contains_words(hay, d)) return false;
  return true;
}

// The item's messages with each image part's grid set from its prepared image (in order).
std::vector<ChatMessage> with_grids(std::vector<ChatMessage> messages,
                                    std::span<const ImageRef> images) {
  size_t next = 0;
  for (ChatMessage& m : messages)
    for (ContentPart& part : m.content)
      if (part.kind == ContentPart::Kind::kImage) {
        if (next == images.size()) throw InvalidRequest("more image parts than image paths");
        part.grid = images[next++]->pixels.grid;
      }
  return messages;
}

DemoEval::Prompt DemoEval::prompt_of(const EvalItem& item) const {
  Prompt p;
  p.chat = {.mode = item.mode, .effort = ReasoningEffort::of(item.effort)};
  for (const std::string& path : item.image_paths) p.images.push_back(engine_.prepare_image(path));
  p.messages = with_grids(item.messages, p.images);
  return p;
}

std::string DemoEval::render_prompt_text(const EvalItem& item) const {
  const Prompt p = prompt_of(item);
  return engine_.chat_template().render_text(p.messages, p.chat);
}

EvalOutcome DemoEval::run(const EvalItem& item, PrefillMode mode) {
  const Prompt p = prompt_of(item);
  EvalOutcome out;
  out.template_matches =
      engine_.chat_template().render_text(p.messages, p.chat) == item.prompt_text;
  const RenderedPrompt prompt = engine_.chat_template().render(p.messages, p.chat);
  const std::vector<ImageEmbedding> embeddings = engine_.embed_images(prompt.images, p.images, 0);
  GenerationOptions gen;
  gen.max_new_tokens = max_;
  gen.starts_in_thinking = item.mode == ThinkingMode::kThinking;
  gen.prefill.mode = mode;
  gen.prefill.images = embeddings;
  SequenceState state = engine_.model().new_sequence();
  const GenerationResult r = engine_.generator().generate(state, prompt.ids, gen, {});
  out.answer = r.content;
  out.thinking = r.reasoning;
  out.thinking_tokens = r.stats.thinking_tokens;
  out.correct = score_answer(item.expected, r.content, item.match, item.distractors);
  return out;
}

}  // namespace flashdesk
