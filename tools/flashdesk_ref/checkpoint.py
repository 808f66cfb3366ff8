"""Loads a model directory into float32 torch tensors whose values are exactly the stored ones.

Directory: config.json, model.safetensors or model.safetensors.index.json + shards, and for
Engram models engram_map.safetensors (token_map I64 [n_tokens], optionally multipliers I64
[n_engram_layers, max_ngram]) or tokenizer.json to build the map from. Dequantisation (docs/model-spec.md §2.2):
- F8_E4M3 `X.weight` + F8_E8M0 `X.scale` [ceil(out/B), ceil(in/B)], B = weight_block_size (32);
- I8 packed E2M1 `X.weight` [out, in/2] (low nibble = even column) + E8M0 `X.scale` [out, in/32];
- Engram tables `engram.embed.weight` F8_E4M3 [rows, head_dim] + E8M0 scale [rows, head_dim/32]
  are kept as codes + scales (rows are dequantised on gather; the full-size tables are huge);
- BF16 and F32 tensors widen exactly to float32.
"""
import json
import os

import numpy as np
import torch

from .config import load_config
from .engram_hash import engram_multipliers
from .formats import E4M3_TABLE, e8m0_to_f32, unpack_e2m1
from .safetensors import FormatError, SafeTensorsFile, decode_float
from .token_map import TokenizerJson, compressed_token_map


class EngramTable:
    """An FP8 Engram embedding table: uint8 codes [rows, dim] and per-32 E8M0 scales."""

    def __init__(self, codes, scales):
        self.codes = codes      # numpy uint8 [rows, dim]
        self.scales = scales    # numpy uint8 [rows, dim/32]
        self.rows, self.dim = codes.shape

    def gather(self, ids):
        """ids: int64 tensor [...] -> float32 tensor [..., dim] of dequantised rows."""
        flat = ids.reshape(-1).numpy()
        if flat.size and (flat.min() < 0 or flat.max() >= self.rows):
            raise IndexError(f"Engram row id outside 0..{self.rows - 1}")
        values = E4M3_TABLE[self.codes[flat]]                           # [n, dim]
        scale = np.repeat(e8m0_to_f32(self.scales[flat]), 32, axis=-1)  # [n, dim]
        return torch.from_numpy(values * scale).reshape(*ids.shape, self.dim)


class Checkpoint:
    def __init__(self, model_dir):
        self.dir = model_dir
        self.config = load_config(model_dir)
        self.files = _open_shards(model_dir)  # name -> SafeTensorsFile
        self.block = int((self.config.quantization.get("weight_block_size") or [32, 32])[0])
        self.tensors = {}
        self.engram_tables = {}
        for name in self.files:
            if name.endswith(".scale"):
                continue
            if name.endswith("engram.embed.weight"):
                self.engram_tables[name[:-len(".weight")]] = self._engram_table(name)
            else:
                self.tensors[name] = self._load(name)
        self.engram_map = load_engram_map(model_dir, self.config)

    def __getitem__(self, name):
        if name not in self.tensors:
            raise FormatError(f"{self.dir}: checkpoint has no tensor {name!r}")
        return self.tensors[name]

    def has(self, name):
        return name in self.tensors

    def _stored(self, name):
        f = self.files[name]
        return f.dtype(name), f.get(name)

    def _scale_of(self, name):
        scale_name = name[:-len(".weight")] + ".scale" if name.endswith(".weight") else name + ".scale"
        if scale_name not in self.files:
            raise FormatError(f"{self.dir}: quantised tensor {name!r} has no {scale_name!r}")
        dtype, stored = self._stored(scale_name)
        if dtype != "F8_E8M0":
            raise FormatError(f"{self.dir}: {scale_name!r} is {dtype}, expected F8_E8M0")
        return scale_name, e8m0_to_f32(stored)

    def _load(self, name):
        dtype, stored = self._stored(name)
        if dtype in ("F32", "BF16", "F16"):
            return torch.from_numpy(np.array(decode_float(dtype, stored)))
        if dtype == "I64":
            return torch.from_numpy(np.array(stored))
        if dtype == "F8_E4M3":
            return torch.from_numpy(self._dequant_fp8(name, stored))
        if dtype == "I8":
            return torch.from_numpy(self._dequant_fp4(name, stored))
        raise FormatError(f"{self.dir}: tensor {name!r} has unexpected dtype {dtype}")

    def _dequant_fp8(self, name, codes):
        scale_name, scale = self._scale_of(name)
        out, inp = codes.shape
        b = self.block
        want = (-(-out // b), -(-inp // b))
        if scale.shape != want:
            raise FormatError(f"{self.dir}: {scale_name!r} shape {scale.shape}, expected {want} "
                              f"for {b}x{b} blocks of {name!r} {codes.shape}")
        full = np.repeat(np.repeat(scale, b, axis=0), b, axis=1)[:out, :inp]
        return E4M3_TABLE[codes] * full

    def _dequant_fp4(self, name, packed):
        scale_name, scale = self._scale_of(name)
        out, half = packed.shape
        if scale.shape != (out, half * 2 // 32) or (half * 2) % 32:
            raise FormatError(f"{self.dir}: {scale_name!r} shape {scale.shape}, expected "
                              f"{(out, half * 2 // 32)} (one scale per 32 inputs of {name!r})")
        return unpack_e2m1(packed) * np.repeat(scale, 32, axis=1)

    def _engram_table(self, name):
        dtype, codes = self._stored(name)
        scale_name, _ = self._scale_of(name)
        if dtype != "F8_E4M3":
            raise FormatError(f"{self.dir}: {name!r} is {dtype}, expected F8_E4M3")
        scales = self.files[scale_name].get(scale_name)
        if codes.ndim != 2 or scales.shape != (codes.shape[0], codes.shape[1] // 32):
            raise FormatError(f"{self.dir}: {scale_name!r} shape {scales.shape} does not give one "
                              f"scale per 32 values of {name!r} {codes.shape}")
        return EngramTable(codes, scales)


def _open_shards(model_dir):
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        try:
            with open(index, "r", encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise FormatError(f"{index}: cannot read weight_map: {e}") from None
        opened, names = {}, {}
        for name, shard in weight_map.items():
            if shard not in opened:
                opened[shard] = SafeTensorsFile(os.path.join(model_dir, shard))
            if name not in opened[shard].header:
                raise FormatError(f"{index}: {name!r} is mapped to {shard}, which lacks it")
            names[name] = opened[shard]
        return names
    if os.path.exists(single):
        f = SafeTensorsFile(single)
        return {name: f for name in f.names()}
    raise FormatError(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")


def load_engram_map(model_dir, cfg):
    """(token_map int64 tensor [n_tokens], multipliers int64 tensor [n_layers, max_ngram]) or
    None when the config has no Engram layers. The map is engram_map.safetensors when the
    directory has one (a `multipliers` tensor in it must be the official one), else built from
    tokenizer.json as the official code does at load (a published V4.1 directory); the
    multipliers are always the official numpy ones."""
    if not cfg.engram_layer_ids:
        return None
    mult = engram_multipliers(cfg.engram_layer_ids, cfg.engram_max_ngram_size,
                              cfg.engram_compressed_vocab_size)
    path = os.path.join(model_dir, "engram_map.safetensors")
    if os.path.exists(path):
        f = SafeTensorsFile(path)
        if "token_map" not in f.header or f.dtype("token_map") != "I64":
            raise FormatError(f"{path}: needs I64 tensor 'token_map'")
        token_map = np.array(f.get("token_map"))
        if "multipliers" in f.header and (f.dtype("multipliers") != "I64" or
                                          not np.array_equal(np.array(f.get("multipliers")), mult)):
            raise FormatError(f"{path}: multipliers differ from the official ones {mult.tolist()}")
    else:
        tokenizer = os.path.join(model_dir, "tokenizer.json")
        if not os.path.exists(tokenizer):
            raise FormatError(f"{path}: missing, and no tokenizer.json to build it from; Engram "
                              f"layers {cfg.engram_layer_ids} need the compressed-token map")
        built, size = compressed_token_map(TokenizerJson(tokenizer))
        if size != cfg.engram_compressed_vocab_size:
            raise FormatError(f"{tokenizer}: {size} compressed tokens, but the config says "
                              f"engram_compressed_vocab_size = {cfg.engram_compressed_vocab_size}")
        token_map = np.array(built, dtype=np.int64)
    if token_map.ndim != 1 or token_map.shape[0] <= cfg.engram_pad_token_id:
        raise FormatError(f"{path}: token_map shape {token_map.shape} does not cover the pad id")
    if token_map.min() < 0 or token_map.max() >= cfg.engram_compressed_vocab_size:
        raise FormatError(f"{path}: token_map values outside 0..{cfg.engram_compressed_vocab_size - 1}")
    return torch.from_numpy(token_map), torch.from_numpy(mult)
