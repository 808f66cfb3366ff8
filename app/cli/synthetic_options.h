// `--synthetic-weights SEED` and `--synthetic-layers LIST`: the weights generated in memory as
// `make-random --seed SEED [--layers LIST]` would write them (synthetic_checkpoint.h), with
// `--model` (or inspect's path) naming a config.json or a directory holding one. Declared once
// here for every command that opens a model.
#pragma once

#include <optional>

#include <cxxopts.hpp>

#include "engine/checkpoint/synthetic_checkpoint.h"

namespace flashdesk::cli {

// --synthetic-weights; with `layers` also --synthetic-layers (commands that do not run the
// model: a partial set of layers cannot).
void add_synthetic_options(cxxopts::Options& options, bool layers = false);

// The synthetic weights asked for, or nullopt without --synthetic-weights. InvalidRequest for a
// seed that is not a whole number 0 to 2^64 - 1, a bad layer list, or --synthetic-layers alone.
std::optional<SyntheticWeights> synthetic_options(const cxxopts::ParseResult& args);

}  // namespace flashdesk::cli
