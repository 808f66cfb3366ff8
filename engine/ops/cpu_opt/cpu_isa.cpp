// CPUID-based selection of the optimised backend's kernel set.
#include "engine/ops/cpu_opt/cpu_isa.h"

#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "engine/util/error.h"

namespace flashdesk {

namespace {
#if defined(__x86_64__) || defined(__i386__)
// F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}
#endif
}  // namespace

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar:
      return "scalar";
    case CpuIsa::Avx2:
      return "avx2";
    case CpuIsa::Avx512:
      return "avx512";
  }
  return "?";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view name) {
  if (name == "scalar") return CpuIsa::Scalar;
  if (name == "avx2") return CpuIsa::Avx2;
  if (name == "avx512") return CpuIsa::Avx512;
  return std::nullopt;
}

bool cpu_isa_supported(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar:
      return true;
    case CpuIsa::Avx2:
#if defined(__x86_64__) || defined(__i386__)
      __builtin_cpu_init();  // may run before libgcc's own initialiser (static test registration)
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
#else
      return false;
#endif
    case CpuIsa::Avx512:
#if defined(__x86_64__) || defined(__i386__)
      // Every extension the *_avx512.cpp files are compiled with (engine/CMakeLists.txt).
      return cpu_isa_supported(CpuIsa::Avx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
#else
      return false;
#endif
  }
  return false;
}

std::vector<CpuIsa> supported_cpu_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx512})
    if (cpu_isa_supported(isa)) out.push_back(isa);
  return out;
}

CpuIsa choose_cpu_isa() {
  const char* forced = std::getenv("FLASHDESK_CPU_ISA");
  if (forced == nullptr || *forced == '\0') return supported_cpu_isas().back();
  const std::optional<CpuIsa> isa = parse_cpu_isa(forced);
  if (!isa)
    throw InvalidRequest("FLASHDESK_CPU_ISA=" + std::string(forced) +
                         ": expected scalar, avx2 or avx512");
  if (!cpu_isa_supported(*isa))
    throw InvalidRequest("FLASHDESK_CPU_ISA=" + std::string(forced) +
                         ": this CPU does not support it");
  return *isa;
}

}  // namespace flashdesk
