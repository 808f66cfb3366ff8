// The prefill-then-decode loop with streaming, thinking/answer split and timing.
#include "engine/runtime/generator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "engine/model/dspark_draft.h"
#include "engine/model/sequence_rollback.h"
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

  if (options.speculative && options.sampling.temperature > 0.0f)
    throw InvalidRequest("speculative decoding is greedy only (temperature 0)");
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
    if (id == special_.eos) {
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
      decode_speculative(state, *drafter, *draft, id, options, result.stats, take);
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

// After `next` was taken: each round drafts after it, runs it and the drafts as one step, takes the
// agreeing drafts and the target's own next token, and keeps exactly the rows of the tokens taken
// but the last (which enters with the next round), rolling back the rest.
void Generator::decode_speculative(SequenceState& state, DsparkDrafter& drafter, DraftState& draft,
                                   TokenId next, const GenerationOptions& options,
                                   GenerationStats& stats,
                                   const std::function<bool(TokenId, int64_t)>& take) {
  const int64_t V = model_.config().text.vocab_size;
  const int64_t most = std::min(drafter.block_size(), model_.config().text.sliding_window - 1);
  auto argmax = [&](const std::vector<float>& logits, int64_t row) {
    const float* r = logits.data() + row * V;
    return static_cast<TokenId>(std::max_element(r, r + V) - r);  // lowest id on ties
  };
  for (int64_t taken = 1;;) {
    const int64_t P = state.position();
    const int64_t k = std::clamp<int64_t>(std::min(most, options.max_new_tokens - taken - 1), 0,
                                          std::max<int64_t>(0, model_.max_context() - P - 1));
    std::vector<int32_t> rows{next};
    if (k > 0) {
      const DraftBlock block = drafter.draft(draft, next);
      std::vector<int32_t> drafts(block.tokens.begin(), block.tokens.begin() + k);
      if (options.override_drafts) options.override_drafts(P, drafts);
      if (static_cast<int64_t>(drafts.size()) != k)
        throw InvalidRequest("override_drafts changed the number of drafts");
      rows.insert(rows.end(), drafts.begin(), drafts.end());
    }
    begin_rollback(model_.backend(), state);
    SequenceStep s;
    s.state = &state;
    s.tokens = rows;
    s.logits = LogitsWanted::All;
    s.want_features = true;
    s.rows_as_decode = true;
    model_.step(std::span<SequenceStep>(&s, 1));
    int64_t a = 0;
    while (a < k && rows[static_cast<size_t>(a + 1)] == argmax(s.out_logits, a)) ++a;
    std::vector<TokenId> out(rows.begin() + 1, rows.begin() + 1 + a);
    out.push_back(argmax(s.out_logits, a));
    if (k > 0) {
      ++stats.verifies;
      stats.drafted += k;
      stats.accepted += a;
    }
    int64_t m = 0;
    bool more = true;
    while (more && m < static_cast<int64_t>(out.size())) {
      more = take(out[static_cast<size_t>(m)], P + 1 + m);
      ++m;
    }
    roll_back(model_.backend(), state, P + m);
    drafter.seed(draft, s.out_features.rows(0, m), P);
    taken += m;
    if (!more) return;
    next = out.back();
  }
}

}  // namespace flashdesk
