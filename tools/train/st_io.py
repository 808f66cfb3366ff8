"""Minimal safetensors reader/writer (numpy) with the checkpoint's dtype strings.

TEMPORARY stand-in with the same API as tools/flashdesk_ref/safetensors.py (write_safetensors,
SafeTensorsFile.get/names/dtype): switch to it once the oracle is on main. Stored forms: F8_E4M3,
F8_E8M0, I8, U8 as uint8; BF16 as uint16 bits; F32, I64, I32 natively.
"""
import json
import os
import struct

import numpy as np

STORAGE = {"F8_E4M3": np.uint8, "F8_E8M0": np.uint8, "I8": np.uint8, "U8": np.uint8,
           "BF16": np.uint16, "F32": np.float32, "I64": np.int64, "I32": np.int32}


class FormatError(ValueError):
    """A malformed file; the message names the file and the tensor or field."""


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype string, stored numpy array)}; data 8-byte aligned, atomic rename."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, array = tensors[name]
        data = np.ascontiguousarray(array, dtype=STORAGE[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": [int(d) for d in np.shape(array)],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


class SafeTensorsFile:
    def __init__(self, path):
        self.path = path
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise FormatError(f"{path}: shorter than the header length")
            (n,) = struct.unpack("<Q", head)
            if 8 + n > size:
                raise FormatError(f"{path}: header length {n} beyond the file")
            try:
                self.header = json.loads(f.read(n))
            except ValueError as e:
                raise FormatError(f"{path}: header is not JSON: {e}") from None
        self.metadata = self.header.pop("__metadata__", {})
        self.start, self.size = 8 + n, size
        for name, e in self.header.items():
            if e.get("dtype") not in STORAGE:
                raise FormatError(f"{path}: tensor {name!r}: unsupported dtype {e.get('dtype')!r}")
            lo, hi = e["data_offsets"]
            want = int(np.prod(e["shape"], dtype=np.int64)) * np.dtype(STORAGE[e["dtype"]]).itemsize
            if hi - lo != want or self.start + hi > size:
                raise FormatError(f"{path}: tensor {name!r}: bad data_offsets {e['data_offsets']}")

    def names(self):
        return list(self.header)

    def dtype(self, name):
        return self.header[name]["dtype"]

    def get(self, name):
        if name not in self.header:
            raise FormatError(f"{self.path}: no tensor named {name!r}")
        e = self.header[name]
        lo, hi = e["data_offsets"]
        with open(self.path, "rb") as f:
            f.seek(self.start + lo)
            raw = f.read(hi - lo)
        return np.frombuffer(raw, dtype=STORAGE[e["dtype"]]).reshape(e["shape"]).copy()


def f32_to_bf16_bits(x):
    """Nearest BF16 bit patterns (ties to even) of float32 values."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)
