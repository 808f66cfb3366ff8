// The attention blocks' input projections (attention_inputs.h).
#include "engine/model/attention_inputs.h"

namespace flashdesk {

AttentionInputs project_attention_inputs(Backend& be, const AttentionWeights& A,
                                         const TextConfig& text, const Tensor& x,
                                         std::span<const int64_t> positions,
                                         std::span<const float> inv_freq,
                                         const BesideWork* beside) {
  const int64_t n = x.rows(), D = text.head_dim, H = A.sink.dim(0);
  const float eps = static_cast<float>(text.rms_norm_eps);
  AttentionInputs in;
  // The key/value row does not depend on the query: a backend may compute it, quantisation
  // included, beside the query's two linears (a decode step's small kernels of one beside the
  // other's weight reads).
  be.beside_begin();
  Tensor kv = be.alloc(DType::F32, Shape{n, D});
  be.linear(x, A.wkv, kQuantLinear, kv);
  in.step_kv = be.alloc(DType::U8, Shape{n, kv_row_bytes(KvFormat::Fp8Window, D)});
  be.rope_quantize_rows(kv, &A.kv_norm, eps, positions, inv_freq, KvFormat::Fp8Window, in.step_kv,
                        0);
  if (beside && beside->with_kv) beside->with_kv();
  const Backend::Beside kv_done = be.beside_end();
  const bool qr_section = beside && beside->with_qr;
  if (beside && beside->after_sections && !qr_section) beside->after_sections();
  in.qr = be.alloc(DType::F32, Shape{n, text.q_lora_rank});
  be.linear(x, A.wq_a, kQuantLinear, in.qr);
  be.rms_norm(in.qr, &A.q_norm, eps, in.qr);
  Backend::Beside qr_done;
  if (qr_section) {
    be.beside_begin();
    beside->with_qr(in.qr);
    qr_done = be.beside_end();
    if (beside->after_sections) beside->after_sections();
  }
  in.q = be.alloc(DType::F32, Shape{n, H, D});
  be.linear(in.qr, A.wq_b, kQuantLinear, in.q);
  be.rope(in.q, D, positions, inv_freq, false);
  be.join(kv_done);
  be.join(qr_done);
  return in;
}

}  // namespace flashdesk
