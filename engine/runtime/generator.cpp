// The prefill-then-decode loop with streaming, thinking/answer split and timing.
#include "engine/runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "engine/model/dspark_decode.h"
#include "engine/runtime/speculative_sampling.h"
#include "engine/tokenizer/streaming_decoder.h"
#include "engine/util/error.h"

namespace flashdesk {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Routes generated ids to the reasoning or the answer, turning them into text as it completes.
// </think> switches channel and is not shown; EOS ends the stream and is not shown.
class ChannelSplitter {
 public:
  ChannelSplitter(const Tokenizer& tokenizer, const SpecialTokenIds& special, bool thinking,
                  GenerationResult& result, const StreamCallbacks& callbacks)
      : decoder_(tokenizer, DecodeOptions{.skip_special = true}),
        special_(special),
        channel_(thinking ? StreamChannel::kThinking : StreamChannel::kAnswer),
        result_(result),
        callbacks_(callbacks) {}

  void push(TokenId id) {
    if (id == special_.think_end && channel_ == StreamChannel::kThinking) {
      emit(decoder_.finish());
      channel_ = StreamChannel::kAnswer;
      saw_think_end_ = true;
      return;
    }
    (channel_ == StreamChannel::kThinking ? result_.reasoning_ids : result_.content_ids)
        .push_back(id);
    emit(decoder_.push(id));
  }
  void finish() { emit(decoder_.finish()); }
  bool saw_think_end() const { return saw_think_end_; }

 private:
  void emit(const std::string& text) {
    if (text.empty()) return;
    (channel_ == StreamChannel::kThinking ? result_.reasoning : result_.content) += text;
    if (callbacks_.on_text) callbacks_.on_text(channel_, text);
  }

  StreamingDecoder decoder_;
  const SpecialTokenIds& special_;
  StreamChannel channel_;
  GenerationResult& result_;
  const StreamCallbacks& callbacks_;
  bool saw_think_end_ = false;
};

}  // namespace

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kEos:
      return "eos";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kContextFull:
      return "context_full";
    case FinishReason::kStopped:
      return "stopped";
  }
  return "?";
}

double GenerationStats::mean_accepted() const {
  return verifies > 0 ? static_cast<double>(accepted) / static_cast<double>(verifies) : 0.0;
}

double GenerationStats::mean_drafted() const {
  return draft_rounds > 0 ? static_cast<double>(drafted) / static_cast<double>(draft_rounds) : 0.0;
}

double GenerationStats::decode_tokens_per_s() const {
  return decode_ms > 0.0 ? static_cast<double>(generated_tokens - 1) * 1000.0 / decode_ms : 0.0;
}

Generator::Generator(Model& model, const Tokenizer& tokenizer)
    : model_(model), tokenizer_(tokenizer), special_(SpecialTokenIds::from(tokenizer)) {}

GenerationResult Generator::generate(SequenceState& state, std::span<const TokenId> new_prompt,
                                     const GenerationOptions& options,
                                     const StreamCallbacks& callbacks,
                                     const std::atomic<bool>* stop) {
  if (options.max_new_tokens < 1) throw InvalidRequest("max_new_tokens must be at least 1");
  Sampler sampler(options.sampling);
  GenerationResult result;
  const int64_t replay = options.prefill.replay;
  if (replay < 0 || replay > static_cast<int64_t>(new_prompt.size()))
    throw InvalidRequest("the replay must be part of the new prompt");
  result.stats.reused_tokens = state.position();
  result.stats.reused_ram_tokens = state.position();
  result.stats.replayed_tokens = replay;
  result.stats.computed_tokens = static_cast<int64_t>(new_prompt.size()) - replay;
  result.stats.prompt_tokens = state.position() + result.stats.computed_tokens;

  if (options.speculative &&
      !(options.draft_min_survival >= 0.0 && options.draft_min_survival <= 1.0))
    throw InvalidRequest("draft_min_survival must be between 0 and 1");
  std::optional<DsparkDrafter> drafter;
  std::optional<DraftState> draft;
  PrefillOptions prefill = options.prefill;
  if (options.speculative) {
    drafter.emplace(model_);
    draft = drafter->new_state();
    prefill.target_features = true;
    prefill.on_step = [&](const SequenceStep& s) {
      if (s.out_features.defined())
        drafter->seed(*draft, s.out_features, s.features_first_position);
    };
  }

  const auto t0 = Clock::now();
  std::vector<float> logits = model_.prefill(state, new_prompt, prefill);
  result.stats.prefill_ms = ms_since(t0);

  ChannelSplitter splitter(tokenizer_, special_, options.starts_in_thinking, result, callbacks);
  Clock::time_point first_token_time;
  result.finish = FinishReason::kLength;
  int64_t n = 0;
  // One generated token that would enter the state at `position`; false when generation ends
  // with it (it then never enters the state: a finished sequence ends at the token before).
  auto take = [&](TokenId id, int64_t position) {
    if (n == 0) {
      first_token_time = Clock::now();
      result.stats.ttft_ms = ms_since(t0);
    }
    ++result.stats.generated_tokens;
    if (callbacks.on_token) callbacks.on_token(id);
    if (id == special_.eos && !options.ignore_eos) {
      result.finish = FinishReason::kEos;
      return false;
    }
    const bool was_thinking = options.starts_in_thinking && !splitter.saw_think_end();
    splitter.push(id);
    if (was_thinking && splitter.saw_think_end())
      result.stats.thinking_ms = ms_since(first_token_time);
    if (stop && stop->load(std::memory_order_relaxed)) {
      result.finish = FinishReason::kStopped;
      return false;
    }
    if (++n == options.max_new_tokens) return false;
    if (position + 1 > model_.max_context()) {
      result.finish = FinishReason::kContextFull;
      return false;
    }
    return true;
  };
  TokenId id = static_cast<TokenId>(sampler.sample(logits));
  if (take(id, state.position())) {
    if (drafter) {
      decode_speculative(state, *drafter, *draft, sampler, id, options, result.stats, take);
    } else {
      // The sampled token enters the KV state; EOS never does here (the next turn's prompt
      // brings it in).
      do {
        logits = model_.decode(state, id);
        id = static_cast<TokenId>(sampler.sample(logits));
      } while (take(id, state.position()));
    }
  }
  splitter.finish();
  result.stats.thinking_tokens =
      static_cast<int64_t>(result.reasoning_ids.size()) + (splitter.saw_think_end() ? 1 : 0);
  if (result.stats.generated_tokens > 0) result.stats.decode_ms = ms_since(first_token_time);
  if (options.starts_in_thinking && !splitter.saw_think_end() && result.stats.generated_tokens > 0)
    result.stats.thinking_ms = result.stats.decode_ms;
  return result;
}

// After `next` was taken: each round verifies drafts after it and takes the agreeing drafts and
// the target's own next token one by one; the state keeps exactly the rows of the tokens taken
// but the last (which enters with the next round).
void Generator::decode_speculative(SequenceState& state, DsparkDrafter& drafter, DraftState& draft,
                                   Sampler& sampler, TokenId next, const GenerationOptions& options,
                                   GenerationStats& stats,
                                   const std::function<bool(TokenId, int64_t)>& take) {
  const int64_t most = most_drafts(model_, drafter);
  SpeculativeSampler speculative(sampler);
  RoundOptions round;
  round.min_survival = options.draft_min_survival;
  round.override_drafts = options.override_drafts;
  if (sampler.params().temperature > 0.0f) round.sampling = &speculative;
  SpeculativeStats counts;
  for (int64_t taken = 1;;) {
    const int64_t room = std::max<int64_t>(0, model_.max_context() - state.position() - 1);
    const int64_t k =
        std::clamp<int64_t>(std::min(most, options.max_new_tokens - taken - 1), 0, room);
    const VerifyRound r = verify_round(model_, drafter, draft, state, next, k, round);
    count_round(r, counts);
    stats.draft_rounds = counts.rounds;
    stats.verifies = counts.verifies;
    stats.drafted = counts.drafted;
    stats.accepted = counts.accepted;
    stats.draft_ms = counts.draft_ms;
    stats.verify_ms = counts.verify_ms;
    int64_t m = 0;
    bool more = true;
    while (more && m < static_cast<int64_t>(r.tokens.size())) {
      more = take(r.tokens[static_cast<size_t>(m)], r.position + 1 + m);
      ++m;
    }
    stats.keep_ms += keep_rows(model_, drafter, draft, state, r, m);
    taken += m;
    if (!more) return;
    next = r.tokens.back();
  }
}

}  // namespace flashdesk
