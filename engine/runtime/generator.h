// The generation loop of one sequence: prefill the new prompt tokens, then sample and decode
// until EOS, the token budget, the context limit or a stop request, streaming text as it forms.
//
// Goals: one loop for the CLI, the desktop app and the eval, with thinking and answer streamed
// on separate channels and per-request stats; speculative decoding with the model's DSpark head
// (several tokens per target step; greedy: the same tokens, sampling: the same distribution;
// docs/dspark.md). Non-goals: batching several requests (the model step already takes a batch; a
// scheduler comes later).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/dspark_decode.h"
#include "engine/model/model.h"
#include "engine/runtime/sampler.h"
#include "engine/tokenizer/special_tokens.h"
#include "engine/tokenizer/tokenizer.h"

namespace flashdesk {

enum class StreamChannel { kThinking, kAnswer };

struct StreamCallbacks {
  // Text that became complete (whole UTF-8 characters), on its channel.
  std::function<void(StreamChannel, std::string_view)> on_text;
  // Every generated id, as sampled (EOS included), e.g. for the session's token log.
  std::function<void(TokenId)> on_token;
};

struct GenerationOptions {
  int64_t max_new_tokens = 2048;
  // Generation goes on past EOS to max_new_tokens (vLLM's `ignore_eos`: answers of a set length
  // for benchmarks and tests). EOS then enters the state like any token and is not shown.
  bool ignore_eos = false;
  SamplingParams sampling;
  // The prompt ends with <think>: the first tokens are reasoning until </think>.
  bool starts_in_thinking = false;
  PrefillOptions prefill;  // mode (bounded by default for generation) and chunking
  // Decoding verifies the DSpark head's drafts (InvalidRequest when the model has none): greedy
  // keeps the agreeing prefix, temperature > 0 accepts by speculative sampling with the request's
  // seeded sampler. The head's rings are seeded from this request's prefill only.
  bool speculative = false;
  // Speculative: verify the longest prefix of drafts whose confidence survival is at least this
  // (SpeculativeOptions::min_survival; 0 = always the whole block).
  double draft_min_survival = kDefaultDraftMinSurvival;
  // Speculative: replaces the drafts for positions position + 1 ... before they are verified
  // (tests and benchmarks force an acceptance rate a random head never reaches). Empty: none.
  std::function<void(int64_t position, std::vector<int32_t>& drafts)> override_drafts = {};
};

enum class FinishReason { kEos, kLength, kContextFull, kStopped };
std::string_view finish_reason_name(FinishReason reason);

struct GenerationStats {
  int64_t prompt_tokens = 0;    // the whole rendered prompt
  int64_t reused_tokens = 0;    // prompt tokens whose KV was in the state before the prefill
  int64_t computed_tokens = 0;  // prompt tokens run through the model now (replay excluded)
  // Of reused_tokens: the restored-prefix tail run again to rebuild window KV (encoder bounded
  // replay), and where the reused KV came from (the session layer sets the split; the generator
  // counts everything as live RAM): reused = ram + ssd + pool.
  int64_t replayed_tokens = 0;
  int64_t reused_ram_tokens = 0;   // live KV of this session (or its global KV rolled back)
  int64_t reused_ssd_tokens = 0;   // global KV blocks read from the SSD block store
  int64_t reused_pool_tokens = 0;  // tokens past the SSD blocks restored from the window pool
  int64_t bytes_read = 0;          // KV bytes read from the SSD block store
  double plan_ms = 0.0;            // rendering-independent matching of live KV, SSD, pool
  double read_ms = 0.0;            // reading and verifying SSD blocks
  double load_ms = 0.0;            // building the restored state (uploading the rows)
  int64_t generated_tokens = 0;    // sampled tokens, EOS included
  int64_t thinking_tokens = 0;     // generated tokens before </think>
  double prefill_ms = 0.0;         // replay + uncached suffix
  double ttft_ms = 0.0;            // request start (planning included) to the first sampled token
  double decode_ms = 0.0;          // after the first token
  // Thinking mode: the first sampled token to </think> (or to the end, when the answer ended while
  // reasoning): how long the reasoning took. 0 in chat mode.
  double thinking_ms = 0.0;
  // Speculative decoding: target steps after a draft, of them the ones that verified drafts,
  // drafts verified, drafts accepted.
  int64_t draft_rounds = 0;
  int64_t verifies = 0;
  int64_t drafted = 0;
  int64_t accepted = 0;
  double draft_ms = 0.0, verify_ms = 0.0, keep_ms = 0.0;  // host time of the rounds' phases
  double decode_tokens_per_s() const;
  double mean_accepted() const;  // accepted drafts per verify
  double mean_drafted() const;   // the confidence's chosen draft lengths, mean over the rounds
};

struct GenerationResult {
  std::vector<TokenId> reasoning_ids;  // before </think> (thinking mode)
  std::vector<TokenId> content_ids;    // the answer, without EOS
  std::string reasoning;
  std::string content;
  FinishReason finish = FinishReason::kEos;
  GenerationStats stats;
};

class Generator {
 public:
  Generator(Model& model, const Tokenizer& tokenizer);

  // Prefills `new_prompt` (the prompt tokens not yet in `state`) and generates. `stop`, when
  // set by another thread, ends generation after the current token. Throws InvalidRequest for
  // an empty new prompt or one beyond the context; the state is then unchanged.
  GenerationResult generate(SequenceState& state, std::span<const TokenId> new_prompt,
                            const GenerationOptions& options, const StreamCallbacks& callbacks,
                            const std::atomic<bool>* stop = nullptr);

 private:
  void decode_speculative(SequenceState& state, DsparkDrafter& drafter, DraftState& draft,
                          Sampler& sampler, TokenId next, const GenerationOptions& options,
                          GenerationStats& stats,
                          const std::function<bool(TokenId, int64_t)>& take);

  Model& model_;
  const Tokenizer& tokenizer_;
  SpecialTokenIds special_;
};

}  // namespace flashdesk
