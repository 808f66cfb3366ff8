// Consistency checks of a parsed ModelConfig: ranges, the 32-element quantisation block,
// list lengths, source layer ids and Engram table sizes. Each failure names file and field.
#pragma once

#include <set>
#include <string>

#include "engine/checkpoint/config.h"

namespace flashdesk {

// Throws FormatError(file, "<field path>: <what is wrong>") at the first contradiction, saying
// which of the values it judges are defaults: `written` holds the paths of the fields the file
// has ("text_config.hidden_size"). Bounds are generous but finite, so hostile configs cannot
// overflow tensor sizes.
void validate_model_config(const ModelConfig& config, const std::string& file,
                           const std::set<std::string>& written);

}  // namespace flashdesk
