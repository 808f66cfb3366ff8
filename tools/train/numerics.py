"""Where the training forward rounds (docs/numerics.md): activations are BF16 tensors on the GPU,
or FP32 tensors holding BF16-rounded values ("emulation", used on the CPU and by the oracle
check), and every linear layer applies the inference quantisers when QAT is on.

Weights are FP32 master parameters; each forward reads them through bf16 rounding or the FP8/FP4
quantisers (straight-through), so the trained values are what the exporter writes.
"""
import torch
import torch.nn.functional as F

from . import quant

BF16, F32 = torch.bfloat16, torch.float32


class Numerics:
    def __init__(self, emulate_fp32=False, qat=True, block=32, blocked=None):
        self.act = F32 if emulate_fp32 else BF16  # dtype of activations between ops
        self.qat = qat                            # may be switched on after a warm-up
        self.block = block                        # FP8 weight tile / activation block
        # FP8/FP4 linears (with QAT) summed as the official GEMM: an FP32 partial per K-block
        # of 32, the partials added in K order. That is FP32 summation order, not a rounding
        # point, and it costs FP32 products instead of BF16 ones: on by default in FP32
        # emulation (CPU, oracle checks), off by default on the GPU's BF16 path
        # (settings `blocked_linears`).
        self.blocked = emulate_fp32 if blocked is None else bool(blocked)

    # ---- rounding ---------------------------------------------------------------------------
    def rb(self, x):
        """bf16(x) in the activation dtype."""
        if self.act == BF16:
            return x.to(BF16)
        return x.to(BF16).to(F32)

    def w_bf16(self, w):
        """A BF16 checkpoint tensor's value (gradient passes through the cast)."""
        return self.rb(w)

    def w_fp8(self, w):
        return quant.fp8_weight_ste(w, self.block).to(self.act) if self.qat else self.rb(w)

    def w_fp4(self, w):
        return quant.fp4_weight_ste(w, 32).to(self.act) if self.qat else self.rb(w)

    def act_quant(self, x):
        return quant.act_quant_ste(x, 32) if self.qat else x

    def kv_fp8(self, x):
        """Window KV: FP8 block 32 over all dims (stored in the ring)."""
        return quant.act_quant_ste(x, 32) if self.qat else x

    def kv_fp4(self, x):
        """Compressed main KV: FP4 with E4M3 scales, block 16 (after RoPE)."""
        return quant.fp4_e4m3_ste(x, 16) if self.qat else x

    def index_fp4(self, x):
        """Index queries and keys: FP4 with E8M0 scales, block 32."""
        return quant.fp4_e8m0_ste(x, 32) if self.qat else x

    # ---- linear layers ----------------------------------------------------------------------
    def qmm(self, xq, wq):
        """xq [.., n, K] (act_quant'ed) times a quantised weight wq [.., O, K] transposed (batch
        dims broadcast) -> [.., n, O], not rounded. With QAT and `blocked`: the official FP8/FP4
        GEMM's sums (an FP32 partial per K-block of 32, the partials added in K order, FP32 out);
        otherwise one product in the activation dtype."""
        if not (self.qat and self.blocked):
            return torch.matmul(xq, wq.transpose(-1, -2))
        K = xq.shape[-1]
        if K % 32:
            raise ValueError(f"quantised linear: K = {K} is not a multiple of 32")
        parts = torch.einsum("...nbk,...obk->...nob", xq.to(F32).unflatten(-1, (K // 32, 32)),
                             wq.to(F32).unflatten(-1, (K // 32, 32)))
        acc = parts[..., 0]
        for b in range(1, K // 32):
            acc = acc + parts[..., b]
        return acc

    def linear_fp8(self, x, w):
        """FP8 checkpoint weight: act_quant(x) per 32 along K, FP32 accumulation, output bf16."""
        return self.rb(self.qmm(self.act_quant(x), self.w_fp8(w)))

    def linear_fp8_q(self, xq, w):
        """linear_fp8 of an input already act_quant'ed (one quantisation feeding two linears)."""
        return self.rb(self.qmm(xq, self.w_fp8(w)))

    def linear_bf16(self, x, w, b=None):
        """BF16 weight: FP32 accumulation of bf16 products, output bf16."""
        return self.rb(F.linear(x, self.w_bf16(w), None if b is None else self.w_bf16(b)))

    def linear_f32(self, x, w):
        """BF16 weight promoted to FP32, FP32 input, FP32 output (no rounding)."""
        return F.linear(x.to(F32), self.w_bf16(w).to(F32))

    def rms_norm(self, x, w, eps):
        """bf16(w * (x * rsqrt(mean(x^2) + eps))) computed in FP32."""
        xf = x.to(F32)
        y = xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + eps)
        return self.rb(self.w_bf16(w).to(F32) * y)
