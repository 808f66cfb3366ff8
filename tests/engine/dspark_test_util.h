// Random checkpoints with a DSpark draft head, written once per test binary.
#pragma once

#include <filesystem>

namespace flashdesk::test {

// assets/configs/test-dspark.json (seed 3): the every-role config with three stages (mtp.0..2),
// block size 5, target layers 11-13, Markov rank 32, top-3 routing.
const std::filesystem::path& dspark_every_role_dir();

// The trained demo model assets/models/flash-tiny with a random DSpark head in place of the one
// it ships, in the published layout (the config's stages, the mtp.* tensors in a shard of their
// own, model-dspark.safetensors, and their index entries). Only the target's files are linked;
// the shipped head's files are neither read for their values nor written. Stages as above,
// target layers 9-11, Markov rank 64, noise token vocab - 1. Tests of the shipped head itself:
// dspark_shipped_head_test.cpp.
const std::filesystem::path& flash_tiny_with_random_head_dir();

// flash-tiny's target alone in `dir`: its files linked except the head's three, its config
// written without stages (one compress ratio per main layer) and its index without the mtp.*
// entries.
void write_flash_tiny_target(const std::filesystem::path& dir);

}  // namespace flashdesk::test
