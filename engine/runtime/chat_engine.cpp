// Loading a model directory and running chat turns with live-KV reuse.
#include "engine/runtime/chat_engine.h"

#include <algorithm>

#include "engine/model/dspark_draft.h"
#include "engine/ops/cuda/cuda_devices.h"
#include "engine/placement/auto_placement.h"
#include "engine/placement/machine_detect.h"
#include "engine/runtime/backend_factory.h"
#include "engine/runtime/live_reuse.h"
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
  e->checkpoint_ = open_checkpoint(model_dir, options.synthetic_weights);
  const auto tokenizer_file = e->checkpoint_->dir() / "tokenizer.json";
  if (!std::filesystem::exists(tokenizer_file))
    throw FormatError(tokenizer_file.string(), options.synthetic_weights
                                                   ? "the config's folder has no tokenizer.json"
                                                   : "the model directory has no tokenizer.json");
  e->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_file(tokenizer_file));
  e->template_ = std::make_unique<ChatTemplate>(*e->tokenizer_);
  check_special_tokens_embedded(e->template_->special(), e->checkpoint_->config(),
                                tokenizer_file.string());
  e->backend_ = make_backend(options.backend, options.threads);
  const int64_t host_experts_from =
      e->choose_expert_placement(options.backend, options.host_experts_from);
  e->model_ = std::make_unique<Model>(e->checkpoint_, *e->backend_,
                                      ModelOptions{.max_context = options.max_context,
                                                   .on_load_progress = progress,
                                                   .tokenizer = e->tokenizer_.get(),
                                                   .engram_cache_dir = options.engram_cache_dir,
                                                   .host_experts_from_layer = host_experts_from});
  e->draft_head_ = DsparkDrafter::available(*e->model_);
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
  e->name_ = config_name.empty() ? e->checkpoint_->dir().filename().string() : config_name;
  return e;
}

ChatEngine::~ChatEngine() = default;

int64_t ChatEngine::choose_expert_placement(const std::string& backend,
                                            std::optional<int64_t> asked) {
  const int64_t layers = checkpoint_->config().text.num_hidden_layers;
  int64_t from = asked.value_or(-1);
  if (!asked) {
    // A GPU backend: the planner decides from the GPU's free memory, before any upload.
    const std::optional<int> gpu = cuda_index(backend);
    if (gpu) {
      for (const CudaDeviceInfo& d : cuda_devices())
        if (d.index == *gpu) {
          const ExpertPlacement p = place_experts_for_one_gpu(checkpoint_->config(), d.free_bytes,
                                                              available_host_bytes());
          from = p.host_experts_from;
          placement_summary_ = p.summary;
        }
    }
  } else if (from >= 0 && from < layers) {
    placement_summary_ = "routed experts of layers " + std::to_string(from) + "-" +
                         std::to_string(layers - 1) +
                         " stay in host memory and the CPU computes them (as asked)";
  }
  return from;
}

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

size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

ChatSession::ChatSession(ChatEngine& engine) : engine_(engine) {}

void ChatSession::set_system_prompt(std::string text) {
  conversation_.system_prompt = std::move(text);
}

void ChatSession::reset() {
  conversation_.messages.clear();
  live_.reset();
  live_images_.clear();
}

int64_t ChatSession::image_safe_common(int64_t common, const RenderedTurn& rendered) const {
  std::vector<LiveImage> prompt;
  for (size_t i = 0; i < rendered.prompt.images.size(); ++i)
    prompt.push_back({rendered.prompt.images[i].begin, rendered.prompt.images[i].end,
                      rendered.images[i]->digest});
  const auto same = [](const LiveImage& a, const LiveImage& b) {
    return a.begin == b.begin && a.end == b.end && a.digest == b.digest;
  };
  const auto in = [&](const std::vector<LiveImage>& spans, const LiveImage& x) {
    return std::any_of(spans.begin(), spans.end(), [&](const LiveImage& y) { return same(x, y); });
  };
  int64_t limit = common;
  for (const LiveImage& x : prompt)
    if (static_cast<int64_t>(x.begin) < limit && !in(live_images_, x))
      limit = static_cast<int64_t>(x.begin);
  for (const LiveImage& x : live_images_)
    if (static_cast<int64_t>(x.begin) < limit && !in(prompt, x))
      limit = static_cast<int64_t>(x.begin);
  return limit;
}

// The live KV serves what the new prompt still shares with it: extended, or cut back to where the
// conversation changed (live_reuse.h); otherwise a new sequence. Returns the replay the prefill
// runs (the live state's last tokens).
int64_t ChatSession::reuse_live(const RenderedTurn& rendered) {
  const std::vector<TokenId>& prompt = rendered.prompt.ids;
  if (live_) {
    const int64_t common =
        image_safe_common(static_cast<int64_t>(common_prefix(live_->tokens, prompt)), rendered);
    const LiveReuse plan = plan_live_reuse(*live_, static_cast<int64_t>(prompt.size()), common);
    if (plan.kind != LiveReuse::Kind::none)
      return apply_live_reuse(engine_.backend(), *live_, plan);
  }
  live_ = engine_.model().new_sequence();
  return 0;
}

RenderedTurn ChatSession::render(ConversationMessage user, const ChatOptions& options) const {
  Conversation next;
  next.system_prompt = conversation_.system_prompt;
  next.messages = conversation_.messages;
  next.messages.push_back(std::move(user));
  return render_conversation(engine_.chat_template(), next, options);
}

TurnResult ChatSession::send(ConversationMessage user, const TurnOptions& options,
                             const StreamCallbacks& callbacks, const std::atomic<bool>* stop) {
  if (user.role != Role::kUser) throw InvalidRequest("a turn starts with a user message");
  const RenderedTurn rendered =
      render(user, ChatOptions{.mode = options.mode, .effort = options.effort});
  TurnResult turn;
  turn.prompt_ids = rendered.prompt.ids;
  turn.prompt_text = rendered.prompt.text;

  const int64_t replay = reuse_live(rendered);
  const auto reuse = static_cast<size_t>(live_->position() - replay);

  GenerationOptions gen = options.generation;
  gen.starts_in_thinking = options.mode == ThinkingMode::kThinking;
  gen.prefill.replay = replay;
  gen.prefill.mark_at = thinking_mark(options.mode, static_cast<int64_t>(turn.prompt_ids.size()));
  const std::span<const TokenId> suffix = std::span<const TokenId>(turn.prompt_ids).subspan(reuse);
  // Images before the prefill keep their KV; the ones in the suffix or the replay are encoded now.
  const std::vector<ImageEmbedding> embeddings =
      engine_.embed_images(rendered.prompt.images, rendered.images, reuse);
  gen.prefill.images = embeddings;
  ConversationMessage answer;
  answer.role = Role::kAssistant;
  StreamCallbacks sampled = callbacks;
  sampled.on_token = [&](TokenId id) {
    answer.sampled_ids.push_back(id);
    if (callbacks.on_token) callbacks.on_token(id);
  };
  try {
    turn.generation = engine_.generator().generate(*live_, suffix, gen, sampled, stop);
  } catch (...) {
    live_.reset();  // a failed step may have left the state half-updated
    live_images_.clear();
    throw;
  }
  live_images_.clear();
  for (size_t i = 0; i < rendered.prompt.images.size(); ++i)
    live_images_.push_back({rendered.prompt.images[i].begin, rendered.prompt.images[i].end,
                            rendered.images[i]->digest});
  answer.text = turn.generation.content;
  answer.thinking = turn.generation.reasoning;
  conversation_.messages.push_back(std::move(user));
  conversation_.messages.push_back(std::move(answer));
  return turn;
}

}  // namespace flashdesk
