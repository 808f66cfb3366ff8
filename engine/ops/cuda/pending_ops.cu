// Step 1 of the CUDA backend: the compute ops are not written yet; each says so when called.
#include "engine/ops/cuda/cuda_backend.h"

namespace flashdesk {

void CudaBackend::linear(const Tensor&, const LinearWeight&, LinearMode, Tensor&) {
  FD_CHECK(false, "cuda: linear is not written yet");
}

void CudaBackend::grouped_linear(const Tensor&, const LinearWeight&, int64_t, Tensor&) {
  FD_CHECK(false, "cuda: grouped_linear is not written yet");
}

void CudaBackend::rms_norm(const Tensor&, const Tensor*, float, Tensor&) {
  FD_CHECK(false, "cuda: rms_norm is not written yet");
}

void CudaBackend::rope(Tensor&, int64_t, std::span<const int64_t>, std::span<const float>, bool) {
  FD_CHECK(false, "cuda: rope is not written yet");
}

void CudaBackend::scale(Tensor&, float) {
  FD_CHECK(false, "cuda: scale is not written yet");
}

void CudaBackend::round_bf16(Tensor&) {
  FD_CHECK(false, "cuda: round_bf16 is not written yet");
}

void CudaBackend::fake_quant_fp4_e8m0(Tensor&, int64_t) {
  FD_CHECK(false, "cuda: fake_quant_fp4_e8m0 is not written yet");
}

void CudaBackend::embed(const Tensor&, std::span<const int32_t>, Tensor&, Tensor&) {
  FD_CHECK(false, "cuda: embed is not written yet");
}

void CudaBackend::hc_mixes(const Tensor&, const HcParams&, const HcSettings&, Tensor&, Tensor&,
                           Tensor&) {
  FD_CHECK(false, "cuda: hc_mixes is not written yet");
}

void CudaBackend::hc_collapse(const Tensor&, const Tensor&, Tensor&) {
  FD_CHECK(false, "cuda: hc_collapse is not written yet");
}

void CudaBackend::hc_expand(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&) {
  FD_CHECK(false, "cuda: hc_expand is not written yet");
}

void CudaBackend::quantize_rows(KvFormat, const Tensor&, Tensor&, int64_t) {
  FD_CHECK(false, "cuda: quantize_rows is not written yet");
}

void CudaBackend::dequantize_rows(KvFormat, const Tensor&, int64_t, Tensor&) {
  FD_CHECK(false, "cuda: dequantize_rows is not written yet");
}

void CudaBackend::compressor_pool(const Tensor&, const Tensor&, int64_t, Tensor&, Tensor&, int64_t&,
                                  Tensor&) {
  FD_CHECK(false, "cuda: compressor_pool is not written yet");
}

void CudaBackend::indexer_select(const IndexerArgs&, Tensor&, Tensor*) {
  FD_CHECK(false, "cuda: indexer_select is not written yet");
}

void CudaBackend::sparse_attention(const AttentionArgs&, Tensor&) {
  FD_CHECK(false, "cuda: sparse_attention is not written yet");
}

void CudaBackend::moe_route(const Tensor&, const Tensor&, const Tensor*, std::span<const uint8_t>,
                            const RouteSettings&, Tensor&, Tensor&) {
  FD_CHECK(false, "cuda: moe_route is not written yet");
}

void CudaBackend::moe_experts(const Tensor&, const Tensor&, const Tensor&,
                              std::span<const ExpertWeights* const>, const ExpertWeights*, float,
                              Tensor&) {
  FD_CHECK(false, "cuda: moe_experts is not written yet");
}

void CudaBackend::engram_gather(const QuantTable&, const Tensor&, Tensor&) {
  FD_CHECK(false, "cuda: engram_gather is not written yet");
}

void CudaBackend::engram_update(Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                std::span<const uint8_t>, float) {
  FD_CHECK(false, "cuda: engram_update is not written yet");
}

}  // namespace flashdesk
