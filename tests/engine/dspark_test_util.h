// Random checkpoints with a DSpark draft head, written once per test binary.
#pragma once

#include <filesystem>

namespace flashdesk::test {

// assets/configs/test-dspark.json (seed 3): the every-role config with three stages (mtp.0..2),
// block size 5, target layers 11-13, Markov rank 32, top-3 routing.
const std::filesystem::path& dspark_every_role_dir();

// The trained demo model assets/models/flash-tiny with a random DSpark head added in the
// published layout (its config gains the stages; the mtp.* tensors sit in a shard of their own):
// flash-tiny ships none yet. Stages as above, target layers 9-11, Markov rank 64.
const std::filesystem::path& flash_tiny_with_random_head_dir();

}  // namespace flashdesk::test
