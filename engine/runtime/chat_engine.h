// The engine's request API: a loaded model (checkpoint, backend, tokenizer, chat format) and the
// chat sessions that talk to it. The CLI and the desktop app use only this layer.
//
// Goals: load a model directory in one call with clear errors; keep each session's KV live
// between turns and reuse what the next rendering shares with it (extended, or cut back to where
// the conversation changed: live_reuse.h); report per turn what was reused and computed; images
// attached to user turns (decoded and preprocessed by prepare_image, encoded by the vision tower
// when their span is prefilled). Non-goals (later layers): SSD block restore and the DRAM window
// pool (storage/), several requests in one batch.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/synthetic_checkpoint.h"
#include "engine/model/model.h"
#include "engine/ops/backend.h"
#include "engine/runtime/conversation.h"
#include "engine/runtime/generator.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/vision/image_input.h"

namespace flashdesk {

class VisionEncoder;

struct EngineOptions {
  std::string backend = "cpu";  // see backend_names()
  int threads = 0;              // 0: every core
  int64_t max_context = 0;      // 0: the model's max_position_embeddings
  DecodeLimits image_limits{};  // pixel and file-size limits of prepare_image
  // Where Engram token maps built from a tokenizer are kept (a published directory has no
  // engram_map.safetensors); the app and the CLI use the data folder's cache. Empty: not kept.
  std::filesystem::path engram_cache_dir{};
  // The routed experts of layers >= this stay in host memory and the CPU computes them (hybrid
  // placement; -1: every expert on the backend). Unset: on a GPU backend the placement planner
  // decides from the GPU's free memory before loading (auto_placement.h), elsewhere -1.
  std::optional<int64_t> host_experts_from{};
  // Set: the weights are generated in memory (synthetic_checkpoint.h; whole models only) and
  // load's path names a config.json or a directory holding one, tokenizer.json beside it.
  std::optional<SyntheticWeights> synthetic_weights{};
};

class ChatEngine {
 public:
  // Opens and validates the directory (config.json, safetensors, tokenizer.json, and for Engram
  // models engram_map.safetensors or the token map built from tokenizer.json), or synthesises
  // the weights (options.synthetic_weights), and uploads the weights. Throws Error subclasses
  // naming the file and what is wrong. `progress` is told of each weight tensor uploaded (on
  // this thread) and ends at done == total (load_progress.h).
  static std::unique_ptr<ChatEngine> load(const std::filesystem::path& model_dir,
                                          const EngineOptions& options = {},
                                          const LoadProgressCallback& progress = {});
  ~ChatEngine();

  const ModelConfig& config() const { return model_->config(); }
  const std::string& name() const { return name_; }
  // Where the weights went when not all on the backend ("routed experts of layers 30-39 stay in
  // host memory ..."); empty otherwise.
  const std::string& placement_summary() const { return placement_summary_; }
  std::string fingerprint() const { return checkpoint_->fingerprint(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate& chat_template() const { return *template_; }
  Model& model() { return *model_; }
  Generator& generator() { return *generator_; }
  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }

  // Images: available when the model has a vision tower (vision_config) and the backend has
  // vision ops. prepare_image reads, decodes and preprocesses a file (IoError, FormatError;
  // InvalidRequest for a model without vision) and may run on any thread.
  bool has_vision() const { return vision_ != nullptr; }
  // True when the model's DSpark draft head loaded (TurnOptions::generation.speculative needs it);
  // a config that declares stages without mtp.* weights, or several devices, gives false.
  bool has_draft_head() const { return draft_head_; }
  ImageRef prepare_image(const std::filesystem::path& path) const;
  // The same from a file's bytes the caller has read (and keeps, e.g. to store them); `name`
  // labels errors. The size limit applies as to a file (decode_image checks it).
  ImageRef prepare_image_bytes(std::span<const uint8_t> bytes, const std::string& name) const;
  // Span embeddings for the images of a rendered prompt (spans and images in prompt order) whose
  // span reaches past `reuse` (ids already in the state), `first` relative to ids[reuse]; what
  // PrefillOptions::images takes.
  std::vector<ImageEmbedding> embed_images(std::span<const ImageSpan> spans,
                                           std::span<const ImageRef> images, size_t reuse);

 private:
  ChatEngine() = default;
  // The layer from which routed experts stay in host memory (ModelOptions::host_experts_from_layer)
  // for `asked` (unset: the planner's choice on a GPU backend), and placement_summary_.
  int64_t choose_expert_placement(const std::string& backend, std::optional<int64_t> asked);
  void require_vision() const;  // InvalidRequest naming why images cannot be read
  std::shared_ptr<const Checkpoint> checkpoint_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  std::unique_ptr<Generator> generator_;
  std::unique_ptr<VisionEncoder> vision_;
  DecodeLimits image_limits_;
  std::string name_;
  std::string placement_summary_;
  bool draft_head_ = false;
};

struct TurnOptions {
  ThinkingMode mode = ThinkingMode::kThinking;
  ReasoningEffort effort;
  GenerationOptions generation;  // starts_in_thinking is set from `mode`
};

struct TurnResult {
  GenerationResult generation;
  std::vector<TokenId> prompt_ids;  // the rendered prompt of this turn
  std::string prompt_text;          // the same prompt as text (RenderedPrompt::text)
};

// One conversation with its live KV state. Not thread-safe: one turn at a time.
class ChatSession {
 public:
  explicit ChatSession(ChatEngine& engine);

  void set_system_prompt(std::string text);
  const std::vector<ConversationMessage>& messages() const { return conversation_.messages; }
  // Replaces the conversation, e.g. with one read back from storage or cut before an answer to
  // regenerate. The live KV stays: the next send() reuses what its rendering still shares.
  void set_messages(std::vector<ConversationMessage> messages) {
    conversation_.messages = std::move(messages);
  }
  // The prompt send(user) would render with `options`; nothing runs.
  RenderedTurn render(ConversationMessage user, const ChatOptions& options) const;
  // Appends `user` (user_turn: text and images), renders the conversation, reuses the live KV
  // where the rendering extends it (else starts a new sequence), generates, and appends the
  // answer with every id it was sampled as.
  TurnResult send(ConversationMessage user, const TurnOptions& options,
                  const StreamCallbacks& callbacks, const std::atomic<bool>* stop = nullptr);
  // Forgets the conversation and the KV.
  void reset();
  // Tokens whose KV is live (for status displays).
  int64_t live_tokens() const { return live_ ? live_->position() : 0; }

 private:
  // An image inside the live tokens: its placeholder span and the picture's digest. Placeholder
  // ids are the same for every picture, so the live KV serves a prompt only up to the first span
  // that does not hold the same picture.
  struct LiveImage {
    size_t begin = 0, end = 0;
    std::string digest;
  };
  int64_t image_safe_common(int64_t common, const RenderedTurn& rendered) const;
  int64_t reuse_live(const RenderedTurn& rendered);

  ChatEngine& engine_;
  Conversation conversation_;
  std::optional<SequenceState> live_;
  std::vector<LiveImage> live_images_;
};

// Length of the common prefix of two id sequences.
size_t common_prefix(std::span<const TokenId> a, std::span<const TokenId> b);

}  // namespace flashdesk
