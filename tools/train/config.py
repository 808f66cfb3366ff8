"""Model config for training: the oracle's config.json reader (tools/flashdesk_ref/config.py:
reference defaults, CSA2 roles from the config fields, decoder first layer) plus what the
trainer needs on top: the vision config as an object, the FP8 block size, width checks."""
import json
import os

from flashdesk_ref.config import FULL, REINDEX, REUSE, WINDOW, Config  # noqa: F401
from flashdesk_ref.safetensors import FormatError

ConfigError = FormatError

VISION_DEFAULTS = dict(num_hidden_layers=32, hidden_size=1024, num_attention_heads=16,
                       intermediate_size=2816, patch_size=14, rope_theta=10000.0,
                       downsample_ratio=3, max_image_tokens=1024, min_pixels=295936,
                       max_wh_ratio=None, norm_eps=1e-6)


class VisionConfig:
    def __init__(self, raw):
        for key, default in VISION_DEFAULTS.items():
            setattr(self, key, raw.get(key, default))
        self.head_dim = self.hidden_size // self.num_attention_heads


class ModelConfig(Config):
    def __init__(self, raw, where="config.json"):
        super().__init__(raw, name_hint=(raw.get("name") if isinstance(raw, dict) else None)
                         or "model", where=where)
        self.vision = VisionConfig(raw["vision_config"]) if raw.get("vision_config") else None
        self.pad_token_id = raw.get("pad_token_id", 2)
        self.weight_block = int((self.quantization.get("weight_block_size") or [32, 32])[0])
        for key in ("hidden_size", "head_dim", "index_head_dim", "q_lora_rank",
                    "moe_intermediate_size", "o_lora_rank"):
            if getattr(self, key) % 32:
                self._fail(key, "must be a multiple of 32 (FP8/FP4 blocks)")
        if self.engram_layer_ids and self.engram_head_dim % 32:
            self._fail("engram_head_dim", "must be a multiple of 32 (per-32 FP8 scales)")


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
