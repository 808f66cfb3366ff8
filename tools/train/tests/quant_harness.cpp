// Applies the engine's scalar quantisers (engine/util/quant.h) to float32 blocks read from a
// file, for tools/train/tests/test_quant.py. Usage: quant_harness MODE BLOCK IN OUT.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/util/quant.h"

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  const char* mode = argv[1];
  const size_t block = std::strtoul(argv[2], nullptr, 10);
  FILE* in = std::fopen(argv[3], "rb");
  if (!in) return 3;
  std::vector<float> x;
  float v;
  while (std::fread(&v, sizeof v, 1, in) == 1) x.push_back(v);
  std::fclose(in);
  if (std::strcmp(mode, "fp8") == 0)
    flashdesk::fake_quant_fp8(x.data(), x.size(), block);
  else if (std::strcmp(mode, "fp4_e8m0") == 0)
    flashdesk::fake_quant_fp4_e8m0(x.data(), x.size(), block);
  else if (std::strcmp(mode, "fp4_e4m3") == 0)
    flashdesk::fake_quant_fp4_e4m3(x.data(), x.size(), block);
  else
    return 4;
  FILE* out = std::fopen(argv[4], "wb");
  if (!out) return 5;
  std::fwrite(x.data(), sizeof(float), x.size(), out);
  std::fclose(out);
  return 0;
}
