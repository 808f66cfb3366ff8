// Which SIMD instruction set the optimised CPU backend runs its kernels with: detected from CPUID
// at run time, overridable by FLASHDESK_CPU_ISA (scalar | avx2 | avx512) so tests and benchmarks
// can force each path. The binary itself is built for baseline x86-64; only *_avx2.cpp and
// *_avx512.cpp files use those instruction sets.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace flashdesk {

enum class CpuIsa : unsigned char {
  Scalar,  // portable C++ (the reference kernels' order), any x86-64 or other CPU
  Avx2,    // AVX2 + FMA + F16C (Haswell / Zen and later)
  Avx512,  // Avx2 + AVX-512 F/BW/VL/DQ (Skylake-SP / Zen 4 and later): the FP4 decode GEMV
};

std::string_view cpu_isa_name(CpuIsa isa);
// "scalar" / "avx2" / "avx512" (case-sensitive); nullopt for anything else.
std::optional<CpuIsa> parse_cpu_isa(std::string_view name);
// True when this CPU can run the kernels of `isa`.
bool cpu_isa_supported(CpuIsa isa);
// Every ISA this CPU can run, in increasing order (always starts with Scalar).
std::vector<CpuIsa> supported_cpu_isas();
// The best supported ISA, or the one FLASHDESK_CPU_ISA names. Throws InvalidRequest when the
// variable names an unknown ISA or one this CPU lacks (running it would crash with SIGILL).
CpuIsa choose_cpu_isa();

}  // namespace flashdesk
