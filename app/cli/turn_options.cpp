// Declares and reads the generation options of the CLI; formats answers as JSON.
#include "app/cli/turn_options.h"

#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/cli_numbers.h"
#include "app/cli/default_model.h"
#include "app/cli/synthetic_options.h"
#include "engine/util/error.h"
#ifdef FLASHDESK_HAVE_STORAGE
#include "storage/storage_layout.h"
#endif

namespace flashdesk::cli {

void add_model_options(cxxopts::Options& options) {
  // Without --model the bundled demo model, when one is installed or beside the source tree.
  options.add_options("model")(
      "model", "model directory (with --synthetic-weights: a config.json or its directory)",
      cxxopts::value<std::string>()->default_value(default_model_dir()))(
      "backend", "compute backend: cpu, cpu-reference, cuda (GPU 0) or cuda:N (GPU N)",
      cxxopts::value<std::string>()->default_value("cpu"))(
      "threads", "CPU threads (0 = every core)", cxxopts::value<int>()->default_value("0"))(
      "max-context", "longest sequence in tokens (0 = the model's)",
      cxxopts::value<int64_t>()->default_value("0"))(
      "host-experts-from",
      "routed experts of layers >= L stay in host memory and the CPU computes them: auto (on a "
      "GPU, as the placement planner decides from its free memory), none, or a layer L",
      cxxopts::value<std::string>()->default_value("auto"));
  add_synthetic_options(options);
}

void add_turn_options(cxxopts::Options& options) {
  options.add_options("generation")("effort",
                                    "reasoning effort: 1-100, low (50), high (75) or max (100)",
                                    cxxopts::value<std::string>()->default_value("high"))(
      "thinking", "thinking mode: on or off", cxxopts::value<std::string>()->default_value("on"))(
      "max-tokens", "most tokens to generate per answer",
      cxxopts::value<int64_t>()->default_value("2048"))(
      "temperature", "sampling temperature (0 = greedy)",
      cxxopts::value<float>()->default_value("0"))("top-p", "nucleus sampling mass",
                                                   cxxopts::value<float>()->default_value("1"))(
      "seed", "sampling seed", cxxopts::value<uint64_t>()->default_value("0"))(
      "prefill", "prefill mode: bounded (decoder bounded replay) or exact",
      cxxopts::value<std::string>()->default_value("bounded"))(
      "chunk", "prefill chunk in tokens (0 = whole prompt)",
      cxxopts::value<int64_t>()->default_value("0"))("json",
                                                     "print each answer as one JSON object")(
      "speculative",
      "speculative decoding: auto (dspark when the model has a draft head and the backend is a "
      "GPU, else off), dspark (verifies the model's DSpark drafts; greedy or sampled) or off",
      cxxopts::value<std::string>()->default_value("auto"))(
      "draft-min-survival",
      "speculative: verify the drafts while the confidence head's survival (the chance that all "
      "are accepted) stays at least this; 0 = always the whole block",
      cxxopts::value<double>()->default_value(std::to_string(kDefaultDraftMinSurvival)))(
      "image", "an image file for the (first) user message, before its text; repeat for several",
      cxxopts::value<std::vector<std::string>>());
}

std::vector<ImageRef> image_options(ChatEngine& engine, const cxxopts::ParseResult& args) {
  std::vector<ImageRef> images;
  if (!args.count("image")) return images;
  for (const std::string& path : args["image"].as<std::vector<std::string>>())
    images.push_back(engine.prepare_image(path));
  return images;
}

std::filesystem::path engram_cache_dir(const std::string& data_dir) {
#ifdef FLASHDESK_HAVE_STORAGE
  try {
    return (data_dir.empty() ? storage::StorageLayout::from_environment()
                             : storage::StorageLayout::in(data_dir))
        .engram_map_dir();
  } catch (const IoError&) {  // no home folder: build the map at every load
    return {};
  }
#else
  (void)data_dir;
  return {};
#endif
}

EngineOptions engine_options(const cxxopts::ParseResult& args, const std::string& data_dir) {
  if (args["model"].as<std::string>().empty())
    throw InvalidRequest("--model DIR is required (no bundled demo model was found)");
  EngineOptions e;
  e.engram_cache_dir = engram_cache_dir(data_dir);
  e.backend = args["backend"].as<std::string>();
  e.threads = args["threads"].as<int>();
  e.max_context = args["max-context"].as<int64_t>();
  e.synthetic_weights = synthetic_options(args);
  if (e.threads < 0) throw InvalidRequest("--threads must be 0 or more");
  const std::string experts = args["host-experts-from"].as<std::string>();
  if (experts == "none") {
    e.host_experts_from = -1;
  } else if (experts != "auto") {
    e.host_experts_from = parse_nonnegative_integer(experts);
    if (!e.host_experts_from)
      throw InvalidRequest("--host-experts-from must be auto, none or a layer number, not '" +
                           experts + "'");
  }
  return e;
}

TurnOptions turn_options(const cxxopts::ParseResult& args) {
  TurnOptions t;
  t.effort = ReasoningEffort::parse(args["effort"].as<std::string>());
  const std::string thinking = args["thinking"].as<std::string>();
  if (thinking != "on" && thinking != "off")
    throw InvalidRequest("--thinking must be on or off, not '" + thinking + "'");
  t.mode = thinking == "on" ? ThinkingMode::kThinking : ThinkingMode::kChat;
  GenerationOptions& g = t.generation;
  g.max_new_tokens = args["max-tokens"].as<int64_t>();
  if (g.max_new_tokens < 1) throw InvalidRequest("--max-tokens must be at least 1");
  g.sampling.temperature = args["temperature"].as<float>();
  g.sampling.top_p = args["top-p"].as<float>();
  g.sampling.seed = args["seed"].as<uint64_t>();
  g.sampling.validate();
  g.prefill.mode = parse_prefill_mode(args["prefill"].as<std::string>());
  g.prefill.chunk_tokens = args["chunk"].as<int64_t>();
  if (g.prefill.chunk_tokens < 0) throw InvalidRequest("--chunk must be 0 or more");
  g.speculative = speculative_option(args) == SpeculativeChoice::kOn;  // until choose_speculative
  g.draft_min_survival = args["draft-min-survival"].as<double>();
  if (!(g.draft_min_survival >= 0.0 && g.draft_min_survival <= 1.0))
    throw InvalidRequest("--draft-min-survival must be between 0 and 1");
  return t;
}

SpeculativeChoice speculative_option(const cxxopts::ParseResult& args) {
  const std::string word = args["speculative"].as<std::string>();
  const std::optional<SpeculativeChoice> choice = parse_speculative_choice(word);
  if (!choice)
    throw InvalidRequest("--speculative must be auto, dspark or off, not '" + word + "'");
  return *choice;
}

void choose_speculative(TurnOptions& turn, const cxxopts::ParseResult& args,
                        const ChatEngine& engine) {
  turn.generation.speculative = speculative_enabled(speculative_option(args), engine);
}

std::string turn_json(const TurnResult& turn,
                      const std::vector<std::pair<std::string, int64_t>>& extra) {
  const GenerationResult& g = turn.generation;
  const GenerationStats& s = g.stats;
  std::vector<TokenId> ids = g.reasoning_ids;
  ids.insert(ids.end(), g.content_ids.begin(), g.content_ids.end());
  nlohmann::json j = {
      {"thinking", g.reasoning},
      {"answer", g.content},
      {"reasoning_ids", g.reasoning_ids},
      {"answer_ids", g.content_ids},
      {"finish", std::string(finish_reason_name(g.finish))},
      {"stats",
       {{"prompt_tokens", s.prompt_tokens},
        {"reused_tokens", s.reused_tokens},
        {"reused_ram_tokens", s.reused_ram_tokens},
        {"reused_ssd_tokens", s.reused_ssd_tokens},
        {"reused_pool_tokens", s.reused_pool_tokens},
        {"replayed_tokens", s.replayed_tokens},
        {"computed_tokens", s.computed_tokens},
        {"generated_tokens", s.generated_tokens},
        {"thinking_tokens", s.thinking_tokens},
        {"bytes_read", s.bytes_read},
        {"plan_ms", s.plan_ms},
        {"read_ms", s.read_ms},
        {"load_ms", s.load_ms},
        {"prefill_ms", s.prefill_ms},
        {"ttft_ms", s.ttft_ms},
        {"decode_tokens_per_s", s.decode_tokens_per_s()},
        {"draft_rounds", s.draft_rounds},
        {"mean_draft_tokens", s.mean_drafted()},
        {"verifies", s.verifies},
        {"drafted_tokens", s.drafted},
        {"accepted_tokens", s.accepted},
        {"mean_accepted_per_verify", s.mean_accepted()},
        {"draft_ms", s.draft_ms},
        {"verify_ms", s.verify_ms},
        {"keep_ms", s.keep_ms}}},
  };
  for (const auto& [key, value] : extra) j[key] = value;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string stats_line(const GenerationStats& s) {
  char buf[384];
  std::snprintf(buf, sizeof buf,
                "[%lld prompt tokens: %lld reused (%lld RAM, %lld SSD, %lld pool), %lld replayed, "
                "%lld computed | TTFT %.0f ms | %lld generated (%lld thinking) at %.1f tokens/s]",
                (long long)s.prompt_tokens, (long long)s.reused_tokens,
                (long long)s.reused_ram_tokens, (long long)s.reused_ssd_tokens,
                (long long)s.reused_pool_tokens, (long long)s.replayed_tokens,
                (long long)s.computed_tokens, s.ttft_ms, (long long)s.generated_tokens,
                (long long)s.thinking_tokens, s.decode_tokens_per_s());
  std::string line = buf;
  if (s.draft_rounds > 0) {
    std::snprintf(buf, sizeof buf,
                  " [speculative: %lld verifies, %lld/%lld drafts accepted, %.2f per verify, "
                  "%.2f drafts per round]",
                  (long long)s.verifies, (long long)s.accepted, (long long)s.drafted,
                  s.mean_accepted(), s.mean_drafted());
    line += buf;
  }
  return line;
}

}  // namespace flashdesk::cli
