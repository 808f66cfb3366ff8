"""The V4.1 config.json (nested text_config / vision_config / quantization_config) with the
reference defaults, and each main layer's CSA2 role derived from the config fields alone.

Role rules (docs/model-spec.md §1.2, §3.5-3.7), as this oracle reads them:
- ratio 0: window only.
- KV source of layer l: the nearest layer s <= l in kv_source_layer_ids with the same ratio.
- l in kv_source_layer_ids: Full (own compressor, index keys and indexer; must also be an
  index source). l in index_source_layer_ids otherwise: Reindex (own indexer over its KV
  source's keys). Otherwise Reuse of the nearest index source <= l (which must read the same KV).
- candidates: index sources after candidate_source_layer_id that read the candidate source's KV
  restrict their scores to its candidate blocks (the source's own top-k is not restricted).
- decoder: layers >= the last KV source, when no layer from it on has Engram; otherwise none.
"""
import json
import os
from dataclasses import dataclass, field
from typing import List, Optional

from .safetensors import FormatError

TEXT_DEFAULTS = dict(
    vocab_size=129280, hidden_size=5120, num_hidden_layers=40, num_attention_heads=64,
    num_key_value_heads=1, head_dim=512, qk_rope_head_dim=64, q_lora_rank=1280,
    o_lora_rank=1024, o_groups=8, hidden_act="silu", swiglu_limit=10.0, rms_norm_eps=1e-20,
    max_position_embeddings=1048576, rope_theta=10000.0,
    n_routed_experts=384, n_shared_experts=1, num_experts_per_tok=6, moe_intermediate_size=2304,
    scoring_func="sqrtsoftplus", topk_method="noaux_tc", norm_topk_prob=True,
    routed_scaling_factor=1.5, sliding_window=128, compress_ratios=None,
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

WINDOW, FULL, REINDEX, REUSE = "window", "full", "reindex", "reuse"


@dataclass
class LayerRole:
    layer: int
    ratio: int
    role: str = WINDOW
    kv_source: int = -1         # layer owning the compressed KV and index keys read here
    index_source: int = -1      # layer whose top-k this layer uses (itself when it indexes)
    candidate_source: int = -1  # layer whose candidate blocks restrict this layer's scores
    builds_candidates: bool = False
    engram: bool = False
    decoder: bool = False


class Config:
    """Attribute access to text_config fields (with defaults) plus top-level fields and roles."""

    def __init__(self, raw, name_hint="model", where="config.json"):
        if not isinstance(raw, dict):
            raise FormatError(f"{where}: not a JSON object")
        text = raw.get("text_config", raw)  # a flat text config is accepted as well
        if not isinstance(text, dict):
            raise FormatError(f"{where}: text_config is not an object")
        self.raw = raw
        self.where = where
        self.name = raw.get("name") or name_hint
        for key, default in TEXT_DEFAULTS.items():
            value = text.get(key, default)
            setattr(self, key, list(value) if isinstance(value, tuple) else value)
        rope = dict(ROPE_DEFAULTS)
        rope.update(text.get("rope_scaling") or {})
        if "type" in rope and "rope_type" not in (text.get("rope_scaling") or {}):
            rope["rope_type"] = rope["type"]
        self.rope_scaling = rope
        self.quantization = raw.get("quantization_config", {}) or {}
        self.vision = raw.get("vision_config")
        self.bos_token_id = raw.get("bos_token_id", 0)
        self.eos_token_id = raw.get("eos_token_id", 1)
        self.image_token_id = raw.get("image_token_id", 129264)
        self._validate()
        self.roles = derive_roles(self)
        self.decoder_first_layer = decoder_first_layer(self)
        for r in self.roles:
            r.decoder = r.layer >= self.decoder_first_layer

    def _fail(self, field_name, why):
        raise FormatError(f"{self.where}: text_config.{field_name}: {why}")

    def _validate(self):
        n = self.num_hidden_layers
        if self.compress_ratios is None:
            self._fail("compress_ratios", "missing")
        if len(self.compress_ratios) < n:
            self._fail("compress_ratios", f"{len(self.compress_ratios)} entries for {n} layers")
        for key in ("kv_source_layer_ids", "index_source_layer_ids", "engram_layer_ids"):
            for l in getattr(self, key):
                if not isinstance(l, int) or not 0 <= l < n:
                    self._fail(key, f"layer {l!r} outside 0..{n - 1}")
        if self.head_dim % 2 or self.qk_rope_head_dim > self.head_dim:
            self._fail("qk_rope_head_dim", "must be even and <= head_dim")
        if (self.num_attention_heads * self.head_dim) % self.o_groups:
            self._fail("o_groups", "must divide num_attention_heads * head_dim")
        if len(self.engram_num_embeddings) != len(self.engram_layer_ids):
            self._fail("engram_num_embeddings", "one entry per Engram layer required")
        if self.hc_sinkhorn_iters < 1:
            self._fail("hc_sinkhorn_iters", "must be >= 1")

    @property
    def ratios(self):
        return self.compress_ratios[:self.num_hidden_layers]


def derive_roles(cfg) -> List[LayerRole]:
    ratios = cfg.ratios
    kv_ids = sorted(cfg.kv_source_layer_ids)
    idx_ids = sorted(cfg.index_source_layer_ids)
    cand = cfg.candidate_source_layer_id
    roles = []
    for l, m in enumerate(ratios):
        r = LayerRole(layer=l, ratio=m, engram=l in cfg.engram_layer_ids)
        roles.append(r)
        if m == 0:
            continue
        same = [s for s in kv_ids if s <= l and ratios[s] == m]
        if not same:
            cfg._fail("kv_source_layer_ids", f"layer {l} (ratio {m}) has no KV source at or before it")
        r.kv_source = same[-1]
        if l in kv_ids:
            if l not in idx_ids:
                cfg._fail("index_source_layer_ids", f"KV source {l} must also be an index source")
            r.role, r.index_source = FULL, l
        elif l in idx_ids:
            r.role, r.index_source = REINDEX, l
        else:
            earlier = [s for s in idx_ids if s <= l]
            if not earlier:
                cfg._fail("index_source_layer_ids", f"layer {l} has no index source at or before it")
            r.role, r.index_source = REUSE, earlier[-1]
    for r in roles:
        if r.role == REUSE and roles[r.index_source].kv_source != r.kv_source:
            cfg._fail("index_source_layer_ids",
                      f"layer {r.layer} reuses the top-k of layer {r.index_source}, which reads "
                      f"another KV source ({roles[r.index_source].kv_source} vs {r.kv_source})")
    if cand is not None:
        if cand not in kv_ids:
            cfg._fail("candidate_source_layer_id", f"{cand} is not a KV source")
        roles[cand].builds_candidates = True
        for r in roles:
            if r.role == REINDEX and r.layer > cand and r.kv_source == roles[cand].kv_source:
                r.candidate_source = cand
    return roles


def decoder_first_layer(cfg) -> int:
    """The last KV source L when no layer >= L has Engram; num_hidden_layers otherwise."""
    n = cfg.num_hidden_layers
    if not cfg.kv_source_layer_ids:
        return n
    last = max(cfg.kv_source_layer_ids)
    if any(l >= last for l in cfg.engram_layer_ids):
        return n
    return last


def load_config(model_dir) -> Config:
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path, "r", encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: cannot read config: {e}") from None
    return Config(raw, name_hint=os.path.basename(os.path.normpath(model_dir)), where=path)
