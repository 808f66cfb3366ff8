// The every-role test config with a random DSpark draft head: three stages (mtp.0..2), block size
// 5, target layers 11-13, Markov rank 32, top-3 routing; written once per test binary.
#pragma once

#include <filesystem>

namespace flashdesk::test {

// The random checkpoint directory (seed 3).
const std::filesystem::path& dspark_every_role_dir();

}  // namespace flashdesk::test
