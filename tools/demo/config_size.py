"""Parameter count and checkpoint bytes of a V4.1 config.json (docs/model-spec.md §2.4 tensor list).

Dtypes as the checkpoint stores them: dense linears FP8 E4M3 + E8M0 scales per 32x32 tile
(wo_a included); routed experts packed E2M1 (I8, 2 per byte) + E8M0 per 32 inputs; Engram tables
FP8 + E8M0 per 32 columns; embed, head, norms, gate, compressor, indexer wk/weights_proj, Engram
q/k weights, the vision tower and aligner BF16; attn_sink, gate biases and hc_* F32.
Also prints engram_compressed_vocab_size and the Engram table rows implied by the tokenizer/config.
Run: /usr/bin/python3 tools/demo/config_size.py assets/models/flash-tiny/config.draft.json [--tokenizer T]
"""

import argparse
import json
import math
import os
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

BYTES = {"bf16": 2, "f32": 4}


def _cdiv(a, b):
    return -(-a // b)


def fp8(out, inp, block=32):
    return out * inp, out * inp + _cdiv(out, block) * _cdiv(inp, block)


def fp4(out, inp):
    return out * inp, out * inp // 2 + out * _cdiv(inp, 32)


def plain(n, dtype):
    return n, n * BYTES[dtype]


def layer_tensors(t, layer, hc):
    """[(name, params, bytes, group)] of one transformer layer."""
    dim, H, D, ql = t["hidden_size"], t["num_attention_heads"], t["head_dim"], t["q_lora_rank"]
    og, ol = t["o_groups"], t["o_lora_rank"]
    E, inter = t["n_routed_experts"], t["moe_intermediate_size"]
    ratio = t["compress_ratios"][layer]
    mix = (2 + hc) * hc
    rows = [("norms", *plain(2 * dim, "bf16"), "attention"),
            ("hc_attn+hc_ffn", *plain(2 * (mix * hc * dim + mix + 3), "f32"), "mhc"),
            ("wq_a", *fp8(ql, dim), "attention"), ("q_norm", *plain(ql, "bf16"), "attention"),
            ("wq_b", *fp8(H * D, ql), "attention"), ("wkv", *fp8(D, dim), "attention"),
            ("kv_norm", *plain(D, "bf16"), "attention"), ("wo_a", *fp8(og * ol, H * D // og), "attention"),
            ("wo_b", *fp8(dim, og * ol), "attention"), ("attn_sink", *plain(H, "f32"), "attention"),
            ("gate", *plain(E * dim, "bf16"), "moe"), ("gate biases", *plain(2 * E, "f32"), "moe")]
    for _ in range(t["n_shared_experts"]):
        rows += [("shared w1,w3", *[2 * x for x in fp8(inter, dim)], "moe"), ("shared w2", *fp8(dim, inter), "moe")]
    w13, w2 = fp4(inter, dim), fp4(dim, inter)
    rows.append(("routed experts", E * (2 * w13[0] + w2[0]), E * (2 * w13[1] + w2[1]), "experts"))
    ihd, ihn = t["index_head_dim"], t["index_n_heads"]
    if layer in t["kv_source_layer_ids"]:
        rows += [("compressor.wkv", *plain(D * dim, "bf16"), "compressor"),
                 ("compressor.norm", *plain(D, "bf16"), "compressor"),
                 ("indexer.wk+k_norm", *plain(ihd * D + ihd, "bf16"), "indexer")]
        if ratio > 1:
            rows.append(("compressor.wgate", *plain(D * dim, "bf16"), "compressor"))
    if layer in t["index_source_layer_ids"]:
        rows += [("indexer.wq_b", *fp8(ihn * ihd, ql), "indexer"),
                 ("indexer.weights_proj", *plain(ihn * dim, "bf16"), "indexer")]
    if layer in t.get("engram_layer_ids", []):
        k = t["engram_layer_ids"].index(layer)
        hd, nh, ng = t["engram_head_dim"], t["engram_n_heads"], t["engram_max_ngram_size"]
        n_rows = t["engram_num_embeddings"][k]
        rows += [("engram.embed", n_rows * hd, n_rows * hd + n_rows * _cdiv(hd, 32), "engram"),
                 ("engram.wkv", *fp8(dim * (hc + 1), (ng - 1) * nh * hd), "engram"),
                 ("engram.q,k", *plain(2 * hc * dim, "bf16"), "engram")]
    return rows


def vision_tensors(v, dim):
    if not v:
        return []
    vd, vi, p, ds = v["hidden_size"], v["intermediate_size"], v["patch_size"], v["downsample_ratio"]
    per_block = 2 * vd + (3 * vd * vd + 3 * vd) + (vd * vd + vd) + 2 * vi * vd + vd * vi
    n = (vd * 3 * p * p + vd) + v["num_hidden_layers"] * per_block + vd
    n += (dim * vd * ds * ds + dim) + (dim * dim + dim) + 3 * dim
    return [("vision tower + aligner", *plain(n, "bf16"), "vision")]


def all_tensors(cfg):
    t = cfg["text_config"]
    dim, V, hc = t["hidden_size"], t["vocab_size"], t["hc_mult"]
    rows = [("embed", *plain(V * dim, "bf16"), "embed/head"), ("head", *plain(V * dim, "bf16"), "embed/head"),
            ("norm", *plain(dim, "bf16"), "embed/head")]
    for layer in range(t["num_hidden_layers"]):
        rows += layer_tensors(t, layer, hc)
    return rows + vision_tensors(cfg.get("vision_config"), dim)


def active_params(cfg):
    """Parameters one text token touches (top-k routed experts instead of all, no vision, no Engram table)."""
    t = cfg["text_config"]
    per_expert = 3 * t["moe_intermediate_size"] * t["hidden_size"]
    total = sum(p for name, p, _, g in all_tensors(cfg) if g not in ("vision",) and name != "engram.embed")
    return total - t["num_hidden_layers"] * (t["n_routed_experts"] - t["num_experts_per_tok"]) * per_expert


def engram_primes(vocab_size, n_layers, per_layer):
    """Distinct primes strictly above vocab_size - 1 (as the oracle and the engine read docs/model-spec.md §7),
    drawn in (layer, n-gram size, head) order; sums per layer."""
    def is_prime(n):
        return n > 1 and all(n % d for d in range(2, int(math.isqrt(n)) + 1))

    sums, p = [], vocab_size - 1
    for _ in range(n_layers):
        s = 0
        for _ in range(per_layer):
            p += 1
            while not is_prime(p):
                p += 1
            s += p
        sums.append(s)
    return sums


def engram_compressed_vocab(tokenizer):
    """Distinct normalised decodings over all token ids (docs/model-spec.md §7 step 1, as read there)."""
    keys = set()
    for tid in range(tokenizer.vocab_size):
        raw = tokenizer.id_to_token[tid]
        text = tokenizer.decode([tid])
        if "\ufffd" in text:
            keys.add(("raw", raw))
            continue
        s = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text))
        s = "".join(c for c in s if unicodedata.category(c) != "Mn").lower()
        collapsed = " ".join(s.replace("\t", " ").replace("\r", " ").replace("\n", " ").split(" "))
        norm = " ".join(w for w in collapsed.split(" ") if w) if collapsed.strip() else (" " if s else "")
        keys.add(("text", norm))
    return len(keys)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Parameter count and checkpoint bytes of a V4.1 config.")
    ap.add_argument("config")
    ap.add_argument("--tokenizer", help="tokenizer.json: also compute engram_compressed_vocab_size")
    args = ap.parse_args(argv)
    with open(args.config) as f:
        cfg = json.load(f)
    rows = all_tensors(cfg)
    groups = {}
    for _, p, b, g in rows:
        gp, gb = groups.get(g, (0, 0))
        groups[g] = (gp + p, gb + b)
    total_p, total_b = sum(p for _, p, _, _ in rows), sum(b for _, _, b, _ in rows)
    print(f"{'group':<14}{'params':>14}{'bytes':>14}{'share':>8}")
    for g, (p, b) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"{g:<14}{p:>14,}{b:>14,}{b / total_b:>8.1%}")
    print(f"{'total':<14}{total_p:>14,}{total_b:>14,}  = {total_b / 2**20:.2f} MiB (+ safetensors headers)")
    print(f"active params per text token: {active_params(cfg):,}")
    t = cfg["text_config"]
    if t.get("engram_layer_ids"):
        per_layer = (t["engram_max_ngram_size"] - 1) * t["engram_n_heads"]
        sums = engram_primes(t["engram_vocab_size"], len(t["engram_layer_ids"]), per_layer)
        status = "matches" if sums == t["engram_num_embeddings"] else "DIFFERS from"
        print(f"engram_num_embeddings from the primes: {sums} ({status} the config)")
    if args.tokenizer:
        from demo.bpe import Tokenizer

        print(f"engram_compressed_vocab_size: {engram_compressed_vocab(Tokenizer.from_file(args.tokenizer))}")


if __name__ == "__main__":
    main()
