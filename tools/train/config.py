"""Model config (config.json of a V4.1-style checkpoint) with reference defaults and per-layer
CSA2 roles, as the engine's engine/checkpoint/layer_roles.cpp derives them.

TEMPORARY stand-in: tools/flashdesk_ref/config.py (the oracle) implements the same rules; once it
is on main this module should only re-export it. Field names are the HF config's.
"""
import json
import os
from dataclasses import dataclass
from typing import List

TEXT_DEFAULTS = dict(
    vocab_size=129280, hidden_size=5120, num_hidden_layers=40, num_attention_heads=64,
    num_key_value_heads=1, head_dim=512, qk_rope_head_dim=64, q_lora_rank=1280,
    o_lora_rank=1024, o_groups=8, swiglu_limit=10.0, rms_norm_eps=1e-20, rope_theta=10000.0,
    n_routed_experts=384, n_shared_experts=1, num_experts_per_tok=6, moe_intermediate_size=2304,
    norm_topk_prob=True, routed_scaling_factor=1.5, sliding_window=128, compress_ratios=None,
    compress_rope_theta=160000.0, kv_source_layer_ids=(), index_source_layer_ids=(),
    index_n_heads=32, index_head_dim=128, index_topk=512, candidate_source_layer_id=None,
    candidate_topk_blocks=2048, candidate_block_size=8, hc_mult=4, hc_sinkhorn_iters=20,
    hc_eps=1e-6, engram_layer_ids=(), engram_num_embeddings=(), engram_max_ngram_size=4,
    engram_vocab_size=16000000, engram_n_heads=8, engram_head_dim=256, engram_pad_token_id=2,
    engram_compressed_vocab_size=99092, num_nextn_predict_layers=3, tie_word_embeddings=False,
    gate_temp=1.0,
)
ROPE_DEFAULTS = dict(rope_type="yarn", factor=16.0, beta_fast=32.0, beta_slow=1.0,
                     original_max_position_embeddings=65536)
VISION_DEFAULTS = dict(num_hidden_layers=32, hidden_size=1024, num_attention_heads=16,
                       intermediate_size=2816, patch_size=14, rope_theta=10000.0,
                       downsample_ratio=3, max_image_tokens=1024, min_pixels=295936,
                       max_wh_ratio=None, norm_eps=1e-6)

WINDOW, FULL, REINDEX, REUSE = "window", "full", "reindex", "reuse"


class ConfigError(ValueError):
    """A config.json that is malformed or inconsistent; the message names the field."""


@dataclass
class LayerRole:
    layer: int
    ratio: int
    role: str = WINDOW
    kv_source: int = -1          # layer owning the compressed KV and index keys read here
    index_source: int = -1       # layer whose top-k this layer uses (itself when it indexes)
    candidate_source: int = -1   # layer whose candidate blocks restrict this layer's scores
    builds_candidates: bool = False
    engram: bool = False
    decoder: bool = False        # CED decoder: bounded replay runs it on the prompt tail only


class VisionConfig:
    def __init__(self, raw):
        for key, default in VISION_DEFAULTS.items():
            setattr(self, key, raw.get(key, default))
        self.head_dim = self.hidden_size // self.num_attention_heads


class ModelConfig:
    """text_config fields as attributes (with defaults), top-level ids, vision, roles."""

    def __init__(self, raw, where="config.json"):
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: not a JSON object")
        self.raw, self.where = raw, where
        text = raw.get("text_config", raw)
        for key, default in TEXT_DEFAULTS.items():
            value = text.get(key, default)
            setattr(self, key, list(value) if isinstance(value, tuple) else value)
        rope = dict(ROPE_DEFAULTS)
        rope.update(text.get("rope_scaling") or {})
        self.rope_scaling = rope
        self.name = raw.get("name", "model")
        self.bos_token_id = raw.get("bos_token_id", 0)
        self.eos_token_id = raw.get("eos_token_id", 1)
        self.pad_token_id = raw.get("pad_token_id", 2)
        self.image_token_id = raw.get("image_token_id", 129264)
        self.quantization = raw.get("quantization_config") or {}
        self.weight_block = int((self.quantization.get("weight_block_size") or [32, 32])[0])
        self.vision = VisionConfig(raw["vision_config"]) if raw.get("vision_config") else None
        self._validate()
        self.roles = derive_roles(self)
        self.decoder_first_layer = decoder_first_layer(self)
        for r in self.roles:
            r.decoder = r.layer >= self.decoder_first_layer

    def fail(self, field, why):
        raise ConfigError(f"{self.where}: text_config.{field}: {why}")

    def _validate(self):
        n = self.num_hidden_layers
        if self.compress_ratios is None or len(self.compress_ratios) < n:
            self.fail("compress_ratios", "missing or shorter than num_hidden_layers")
        for key in ("kv_source_layer_ids", "index_source_layer_ids", "engram_layer_ids"):
            for l in getattr(self, key):
                if not isinstance(l, int) or not 0 <= l < n:
                    self.fail(key, f"layer {l!r} outside 0..{n - 1}")
        if self.qk_rope_head_dim % 2 or self.qk_rope_head_dim > self.head_dim:
            self.fail("qk_rope_head_dim", "must be even and <= head_dim")
        if self.head_dim % 32 or self.hidden_size % 32 or self.index_head_dim % 32:
            self.fail("head_dim", "head_dim, hidden_size and index_head_dim must be multiples of 32")
        if (self.num_attention_heads * self.head_dim) % self.o_groups:
            self.fail("o_groups", "must divide num_attention_heads * head_dim")
        if len(self.engram_num_embeddings) != len(self.engram_layer_ids):
            self.fail("engram_num_embeddings", "one entry per Engram layer required")
        if self.engram_layer_ids and self.engram_head_dim % 32:
            self.fail("engram_head_dim", "must be a multiple of 32 (per-32 FP8 scales)")

    @property
    def ratios(self):
        return self.compress_ratios[:self.num_hidden_layers]

    def to_json(self):
        return json.dumps(self.raw, indent=2)


def derive_roles(cfg) -> List[LayerRole]:
    ratios, kv_ids = cfg.ratios, sorted(cfg.kv_source_layer_ids)
    idx_ids, cand = sorted(cfg.index_source_layer_ids), cfg.candidate_source_layer_id
    roles = []
    for l, m in enumerate(ratios):
        r = LayerRole(layer=l, ratio=m, engram=l in cfg.engram_layer_ids)
        roles.append(r)
        if m == 0:
            continue
        same = [s for s in kv_ids if s <= l and ratios[s] == m]
        if not same:
            cfg.fail("kv_source_layer_ids", f"layer {l} (ratio {m}) has no KV source before it")
        r.kv_source = same[-1]
        earlier = [s for s in idx_ids if s <= l]
        if not earlier:
            cfg.fail("index_source_layer_ids", f"layer {l} has no index source before it")
        r.index_source = earlier[-1]
        if l in kv_ids:
            if l not in idx_ids:
                cfg.fail("index_source_layer_ids", f"KV source {l} must also be an index source")
            r.role = FULL
        else:
            r.role = REINDEX if l in idx_ids else REUSE
    for r in roles:
        if r.role != WINDOW and roles[r.index_source].kv_source != r.kv_source:
            cfg.fail("index_source_layer_ids", f"layer {r.layer} and its index source "
                     f"{r.index_source} read different KV sources")
    if cand is not None:
        if cand not in kv_ids:
            cfg.fail("candidate_source_layer_id", f"{cand} is not a KV source")
        roles[cand].builds_candidates = True
        for r in roles:
            if r.role == REINDEX and r.kv_source == cand:
                r.candidate_source = cand
    return roles


def decoder_first_layer(cfg) -> int:
    """The last KV source L when every layer from L on reads L's KV (same ratio, no window-only
    layer, no later KV source) and none has Engram; num_hidden_layers otherwise."""
    n = cfg.num_hidden_layers
    if not cfg.kv_source_layer_ids:
        return n
    last = max(cfg.kv_source_layer_ids)
    for l in range(last, n):
        if l in cfg.engram_layer_ids or cfg.ratios[l] != cfg.ratios[last]:
            return n
    return last


def load_model_config(path) -> ModelConfig:
    """path: a config.json file or a model directory holding one."""
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot read config: {e}") from None
    return ModelConfig(raw, where=path)
