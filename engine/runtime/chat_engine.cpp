// Loading a model directory and running chat turns with live-KV reuse.
#include "engine/runtime/chat_engine.h"

#include <algorithm>

#include "engine/runtime/backend_factory.h"
#include "engine/util/error.h"
#include "engine/vision/vision_encoder.h"

namespace flashdesk {

namespace {

// A tokenizer may have more entries than the embedding has rows (HF allows it, and the official
// code maps all of them for Engram); ids beyond vocab_size are refused when a step meets them.
// The tokens the chat format itself writes must be rows of the embedding, though.
void check_special_tokens_embedded(const SpecialTokenIds& s, const ModelConfig& config,
                                   const std::string& file) {
  const int64_t vocab = config.text.vocab_size;
  std::vector<std::pair<const char*, TokenId>> used = {
      {"begin of sentence", s.bos}, {"end of sentence", s.eos}, {"User", s.user},
      {"Assistant", s.assistant},   {"System", s.system},       {"<think>", s.think_begin},
      {"</think>", s.think_end}};
  if (config.vision) used.emplace_back("deepseek_image", s.image);
  for (const auto& [name, id] : used)
    if (id >= vocab)
      throw FormatError(file, std::string("the chat format's ") + name + " token is id " +
                                  std::to_string(id) + ", beyond the model's vocab_size " +
                                  std::to_string(vocab));
}

}  // namespace

std::unique_ptr<ChatEngine> ChatEngine::load(const std::filesystem::path& model_dir,
                                             const EngineOptions& options,
                                             const LoadProgressCallback& progress) {
  std::unique_ptr<ChatEngine> e(new ChatEngine());
  e->checkpoint_ = Checkpoint::open(model_dir);
  const auto tokenizer_file = model_dir / "tokenizer.json";
  if (!std::filesystem::exists(tokenizer_file))
    throw FormatError(tokenizer_file.string(), "the model directory has no tokenizer.json");
  e->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_file(tokenizer_file));
  e->template_ = std::make_unique<ChatTemplate>(*e->tokenizer_);
  check_special_tokens_embedded(e->template_->special(), e->checkpoint_->config(),
                                tokenizer_file.string());
  e->backend_ = make_backend(options.backend, options.threads);
  e->model_ = std::make_unique<Model>(e->checkpoint_, *e->backend_,
                                      ModelOptions{.max_context = options.max_context,
                                                   .on_load_progress = progress,
                                                   .tokenizer = e->tokenizer_.get(),
                                                   .engram_cache_dir = options.engram_cache_dir});
  e->generator_ = std::make_unique<Generator>(*e->model_, *e->tokenizer_);
  e->image_limits_ = options.image_limits;
  if (e->checkpoint_->config().vision) {
    try {
      e->vision_ = std::make_unique<VisionEncoder>(*e->checkpoint_, *e->backend_);
    } catch (const InvalidRequest&) {
      // This backend has no vision ops: the model still serves text.
    }
  }
  const std::string& config_name = e->checkpoint_->config().name;
  e->name_ = config_name.empty() ? model_dir.filename().string() : config_name;
  return e;
}

ChatEngine::~ChatEngine() = default;

void ChatEngine::require_vision() const {
  if (!vision_)
    throw InvalidRequest(config().vision ? "backend '" + std::string(backend_->name()) +
                                               "' cannot run the vision tower"
                                         : "model '" + name_ + "' has no vision tower");
}

ImageRef ChatEngine::prepare_image(const std::filesystem::path& path) const {
  require_vision();
  return std::make_shared<const PreparedImage>(
      prepare_image_file(path, vision_->config(), image_limits_));
}

ImageRef ChatEngine::prepare_image_bytes(std::span<const uint8_t> bytes,
                                         const std::string& name) const {
  require_vision();
  return std::make_shared<const PreparedImage>(
      flashdesk::prepare_image_bytes(bytes, name, vision_->config(), image_limits_));
}

std::vector<ImageEmbedding> ChatEngine::embed_images(std::span<const ImageSpan> spans,
                                                     std::span<const ImageRef> images,
                                                     size_t reuse) {
  if (spans.size() != images.size())
    throw InvalidRequest(std::to_string(spans.size()) + " image parts but " +
                         std::to_string(images.size()) + " images");
  std::vector<ImageEmbedding> out;
  for (size_t i = 0; i < spans.size(); ++i) {
    const PreprocessedImage& px = images[i]->pixels;
    if (spans[i].grid.rows != px.grid.rows || spans[i].grid.cols != px.grid.cols)
      throw InvalidRequest("image part " + std::to_string(i) + " has a grid that does not match " +
                           images[i]->name);
    if (spans[i].end <= reuse) continue;  // its KV is live already
    if (!vision_) throw InvalidRequest("this engine cannot encode images");
    out.push_back(ImageEmbedding{static_cast<int64_t>(spans[i].begin) - static_cast<int64_t>(reuse),
                                 vision_->encode(px)});
  }
  return out;
}

ChatMessage user_message(std::string text, std::span<const ImageRef> images) {
  std::vector<ContentPart> parts;
  for (const ImageRef& img : images) parts.push_back(ContentPart::of_image(img->pixels.grid));
  if (!text.empty() || images.empty()) parts.push_back(ContentPart::of_text(std::move(text)));
  return ChatMessage::of_parts(Role::kUser, std::move(parts));
}

size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

ChatSession::ChatSession(ChatEngine& engine) : engine_(engine) {}

void ChatSession::set_system_prompt(std::string text) {
  system_prompt_ = text.empty() ? std::nullopt : std::optional<std::string>(std::move(text));
}

void ChatSession::reset() {
  messages_.clear();
  images_.clear();
  live_.reset();
}

TurnResult ChatSession::send(ChatMessage user, const TurnOptions& options,
                             const StreamCallbacks& callbacks, const std::atomic<bool>* stop) {
  return send(std::move(user), {}, options, callbacks, stop);
}

TurnResult ChatSession::send(ChatMessage user, std::vector<ImageRef> images,
                             const TurnOptions& options, const StreamCallbacks& callbacks,
                             const std::atomic<bool>* stop) {
  if (user.role != Role::kUser) throw InvalidRequest("a turn starts with a user message");
  std::vector<ChatMessage> conversation;
  if (system_prompt_) conversation.push_back(ChatMessage::system(*system_prompt_));
  conversation.insert(conversation.end(), messages_.begin(), messages_.end());
  conversation.push_back(user);

  const ChatOptions chat{.mode = options.mode, .effort = options.effort};
  TurnResult turn;
  const RenderedPrompt prompt = engine_.chat_template().render(conversation, chat);
  turn.prompt_ids = prompt.ids;
  std::vector<ImageRef> all_images = images_;
  all_images.insert(all_images.end(), images.begin(), images.end());

  // Reuse the live KV when the new prompt extends it; the state cannot roll back, so anything
  // else (an edited or re-rendered history) starts a new sequence.
  size_t reuse = 0;
  if (live_) {
    reuse = common_prefix(live_->tokens, turn.prompt_ids);
    if (reuse != live_->tokens.size() || reuse == turn.prompt_ids.size()) {
      live_.reset();
      reuse = 0;
    }
  }
  if (!live_) live_ = engine_.model().new_sequence();

  GenerationOptions gen = options.generation;
  gen.starts_in_thinking = options.mode == ThinkingMode::kThinking;
  const std::span<const TokenId> suffix = std::span<const TokenId>(turn.prompt_ids).subspan(reuse);
  // Images before the live prefix keep their KV; the ones in the suffix are encoded now.
  const std::vector<ImageEmbedding> embeddings =
      engine_.embed_images(prompt.images, all_images, reuse);
  gen.prefill.images = embeddings;
  try {
    turn.generation = engine_.generator().generate(*live_, suffix, gen, callbacks, stop);
  } catch (...) {
    live_.reset();  // a failed step may have left the state half-updated
    throw;
  }

  messages_.push_back(std::move(user));
  images_ = std::move(all_images);
  ChatMessage answer = ChatMessage::assistant(turn.generation.content, turn.generation.reasoning);
  answer.content_ids = turn.generation.content_ids;
  if (options.mode == ThinkingMode::kThinking) answer.reasoning_ids = turn.generation.reasoning_ids;
  messages_.push_back(std::move(answer));
  return turn;
}

}  // namespace flashdesk
