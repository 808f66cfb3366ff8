// Forms of the decode experts' tensor-core kernels (moe_decode_tc.cu) that the backend's switches
// pick, shared by CudaBackend and the device context the kernels' launches read them from.
#pragma once

namespace flashdesk::cuda {

// Which one-row expert kernels copy their FP4 units' scale words into their cp.async rings with
// the units rather than loading them into registers: none, the up kernel, or the up and the down.
enum class RingScales { Off, Up, Both };

}  // namespace flashdesk::cuda
