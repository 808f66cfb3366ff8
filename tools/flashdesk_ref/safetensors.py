"""Pure-Python (numpy) reader and writer of safetensors files with the checkpoint's dtypes.

Tensors are returned as their *stored* representation: F8_E4M3 / F8_E8M0 / I8 / U8 as uint8
(I8 packed E2M1 is read as raw bytes), BF16 as uint16 bit patterns, F32 / I64 natively.
`decode_float` turns a stored F32/BF16 tensor into float32. Bad files raise FormatError naming
the file and the tensor or header field.
"""
import json
import os
import struct

import numpy as np

from .formats import bf16_bits_to_f32

# safetensors dtype string -> numpy dtype of the stored elements
STORAGE = {
    "F8_E4M3": np.uint8, "F8_E8M0": np.uint8, "I8": np.uint8, "U8": np.uint8,
    "BF16": np.uint16, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
}
MAX_HEADER = 100 * 1024 * 1024


class FormatError(ValueError):
    """Malformed outside data (file, header, tensor); the message names where."""


class SafeTensorsFile:
    """One opened safetensors file; tensors are read lazily through a memory map."""

    def __init__(self, path):
        self.path = str(path)
        self.header, self.metadata, self._data_start = _read_header(self.path)
        self._map = None

    def names(self):
        return list(self.header.keys())

    def dtype(self, name):
        return self._entry(name)["dtype"]

    def shape(self, name):
        return tuple(self._entry(name)["shape"])

    def get(self, name):
        """Stored array of `name` (a read-only view of the mapped file)."""
        entry = self._entry(name)
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        begin, end = entry["data_offsets"]
        raw = self._map[self._data_start + begin:self._data_start + end]
        return raw.view(STORAGE[entry["dtype"]]).reshape(entry["shape"])

    def _entry(self, name):
        if name not in self.header:
            raise FormatError(f"{self.path}: no tensor named {name!r}")
        return self.header[name]


def _read_header(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) < 8:
            raise FormatError(f"{path}: shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", prefix)
        if n > MAX_HEADER or 8 + n > size:
            raise FormatError(f"{path}: header length {n} exceeds the file ({size} bytes)")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise FormatError(f"{path}: header is not valid JSON: {e}") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", {}) or {}
    data_len = size - 8 - n
    for name, entry in header.items():
        _check_entry(path, name, entry, data_len)
    return header, metadata, 8 + n


def _check_entry(path, name, entry, data_len):
    where = f"{path}: tensor {name!r}"
    if not isinstance(entry, dict):
        raise FormatError(f"{where}: entry is not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in STORAGE:
        raise FormatError(f"{where}: unsupported dtype {dtype!r}")
    if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
        raise FormatError(f"{where}: bad shape {shape!r}")
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(isinstance(o, int) for o in offsets) and 0 <= offsets[0] <= offsets[1] <= data_len):
        raise FormatError(f"{where}: data_offsets {offsets!r} outside the data ({data_len} bytes)")
    numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
    want = numel * np.dtype(STORAGE[dtype]).itemsize
    if offsets[1] - offsets[0] != want:
        raise FormatError(f"{where}: {offsets[1] - offsets[0]} bytes for shape {shape} {dtype} "
                          f"(expected {want})")


def decode_float(dtype, stored):
    """float32 array from a stored F32/BF16/F16 tensor."""
    if dtype == "F32":
        return np.asarray(stored, dtype=np.float32)
    if dtype == "BF16":
        return bf16_bits_to_f32(stored)
    if dtype == "F16":
        return np.asarray(stored, dtype=np.float32)
    raise FormatError(f"dtype {dtype} is not a plain float type")


def write_safetensors(path, tensors, metadata=None):
    """Writes `tensors` = {name: (dtype string, stored numpy array)} with string metadata."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, array = tensors[name]
        if dtype not in STORAGE:
            raise ValueError(f"tensor {name!r}: unsupported dtype {dtype}")
        data = np.ascontiguousarray(array, dtype=STORAGE[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": [int(d) for d in np.shape(array)],
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # data starts 8-byte aligned
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)
