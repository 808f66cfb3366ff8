// Consistency checks of a parsed ModelConfig: ranges, the 32-element quantisation block,
// list lengths, source layer ids and Engram table sizes. Each failure names file and field.
#pragma once

#include <string>

#include "engine/checkpoint/config.h"

namespace flashdesk {

// Throws FormatError(file, "<field path>: <what is wrong>") at the first contradiction.
// Bounds are generous but finite, so hostile configs cannot overflow tensor sizes.
void validate_model_config(const ModelConfig& config, const std::string& file);

}  // namespace flashdesk
