// The AVX-512 kernel table: the AVX2 table with the decode-sized linear layers of FP4 weights
// (the routed experts' GEMV, linear_avx512.cpp) on 512-bit registers. Every other kernel is the
// AVX2 one: they are not bound by the weight decode, and this keeps one copy of each.
#include "engine/ops/cpu_opt/linear_avx512.h"

namespace flashdesk::cpu_opt {

const Kernels* avx512_kernels() {
  static const Kernels k = [] {
    Kernels t = *avx2_kernels();
    t.isa = CpuIsa::Avx512;
    t.linear_rows = avx512::linear_rows;
    return t;
  }();
  return &k;
}

}  // namespace flashdesk::cpu_opt
