// What happens when a mapped model file shrinks while FlashDesk runs: the next read of a page past
// the new end raises SIGBUS, which would kill the process with no word of why. Every mapping made
// by MappedFile is registered here; a SIGBUS inside one writes a message naming the file and the
// byte read to stderr and ends the process with kMappedFileShrankExitCode. A SIGBUS anywhere else
// goes to whatever handled it before (by default: the crash it always was).
//
// Non-goal: carrying on. The weights under the mapping are gone, and answers computed from zeros
// must not reach the KV cache, so stopping is the safe outcome; files small enough to be copied
// (kDefaultCopyLimit) never get here.
#pragma once

#include <cstddef>
#include <filesystem>

namespace flashdesk {

inline constexpr int kMappedFileShrankExitCode = 74;  // EX_IOERR

// Registers [begin, begin + size) as a mapping of `path` (installs the handler on first use).
// Up to 4096 mappings at once; beyond that a mapping stays unguarded.
void guard_mapping(const void* begin, size_t size, const std::filesystem::path& path) noexcept;
void unguard_mapping(const void* begin) noexcept;

}  // namespace flashdesk
