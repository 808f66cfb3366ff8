// The Engram hash tables of a model directory: the compressed-token map and multipliers from
// engram_map.safetensors, the primes computed from the config.
#pragma once

#include "engine/checkpoint/checkpoint.h"
#include "engine/model/engram_hash.h"

namespace flashdesk {

// Throws FormatError naming engram_map.safetensors when it is missing or malformed.
EngramHashTables load_engram_tables(const Checkpoint& checkpoint);

}  // namespace flashdesk
