// Options shared by `generate` and `chat`: model, backend, reasoning effort, thinking mode,
// sampling, prefill and images, declared once and validated where they are read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <cxxopts.hpp>

#include "engine/runtime/chat_engine.h"
#include "engine/runtime/speculative_choice.h"

namespace flashdesk::cli {

void add_model_options(cxxopts::Options& options);
void add_turn_options(cxxopts::Options& options);

// `data_dir`: the command's --data-dir (empty: the XDG folders); built Engram token maps are kept
// in its cache folder.
EngineOptions engine_options(const cxxopts::ParseResult& args, const std::string& data_dir = {});
// Where built Engram token maps are kept: the data folder's cache (StorageLayout::engram_map_dir),
// or nothing (built at every load) without storage or a home folder.
std::filesystem::path engram_cache_dir(const std::string& data_dir);
// The generation options. Speculative decoding is on only for --speculative dspark until
// choose_speculative decides for the loaded engine.
TurnOptions turn_options(const cxxopts::ParseResult& args);
// --speculative (auto, dspark or off); InvalidRequest for another word.
SpeculativeChoice speculative_option(const cxxopts::ParseResult& args);
// Sets turn.generation.speculative from --speculative for `engine` (speculative_enabled: auto is
// on for a model with a draft head on a GPU backend).
void choose_speculative(TurnOptions& turn, const cxxopts::ParseResult& args,
                        const ChatEngine& engine);
// The --image files, decoded and preprocessed for the engine's model.
std::vector<ImageRef> image_options(ChatEngine& engine, const cxxopts::ParseResult& args);

// One answer as a JSON object (thinking, answer, token ids, finish reason, stats), one line.
// `extra` adds integer fields (e.g. the session id) to the object.
std::string turn_json(const TurnResult& turn,
                      const std::vector<std::pair<std::string, int64_t>>& extra = {});
// Per-turn stats in one human-readable line.
std::string stats_line(const GenerationStats& stats);

}  // namespace flashdesk::cli
