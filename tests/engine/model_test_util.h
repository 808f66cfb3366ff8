// Shared fixture of the model tests: a random checkpoint of the every-role test config
// (assets/configs/test-every-role.json) written once per test binary into a temporary directory,
// and helpers to run prefills with an observer.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/random_checkpoint.h"
#include "engine/model/dump_recorder.h"
#include "engine/model/model.h"
#include "engine/ops/cpu/cpu_backend.h"
#include "tests/engine/checkpoint_test_util.h"
#include "tests/engine/error_measures.h"

namespace flashdesk::test {

using TempDir = ::flashdesk::testing::TempDir;  // tests/engine/checkpoint_test_util.h

// The every-role random checkpoint (seed 1), made on first use and shared by all tests.
const std::filesystem::path& every_role_model_dir();

// A model on the CPU reference backend over every_role_model_dir().
struct LoadedModel {
  std::unique_ptr<CpuReferenceBackend> backend;
  std::unique_ptr<Model> model;
};
LoadedModel load_every_role(int threads = 2, const ModelOptions& options = {});

// Deterministic prompt ids in [3, vocab).
std::vector<int32_t> test_prompt(int64_t n, int64_t vocab, uint32_t seed = 1);

}  // namespace flashdesk::test
