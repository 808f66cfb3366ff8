// Element types of checkpoint tensors and engine buffers, with their safetensors spellings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace flashdesk {

enum class DType : uint8_t { F8_E4M3, F8_E8M0, I8, U8, BF16, F16, F32, I32, I64, BOOL };

// Bytes per stored element. I8 holds two packed E2M1 codes per byte in expert weights; the
// logical shape of such a tensor is still given in bytes ([out, in/2]), as safetensors stores it.
size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view safetensors_name);

}  // namespace flashdesk
