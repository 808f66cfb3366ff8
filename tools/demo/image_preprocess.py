"""The engine's image preprocessing in numpy (engine/vision/image_preprocess.cpp and
bicubic_resize.cpp), so that training sees a picture of any size as the engine shows it to the model:
the processed size (vision_layout.resized_size, the same rules), the letterbox to it (PIL's
ImageOps.pad: the largest aspect-kept bicubic resize that fits, centred on grey 127) and nothing
else; the trainer normalises and cuts the patches itself (tools/train/demo_tasks.py).

The bicubic resize is a line-by-line port of the engine's: PIL's separable fixed-point resize
(a = -0.5 cubic, stretched by the downscale factor; weights normalised, rounded to 22 bits;
integer accumulation with a rounding offset; clipped to 8 bits after each pass, horizontal pass
first). The weights are computed in doubles in the same order of operations as the C++, and the
rest is integer arithmetic, so the result is the engine's bit for bit
(tests/tools/demo_styles_test.py checks it against the PIL letterbox golden that
tests/engine/image_preprocess_test.cpp holds the engine to).
"""

import math

import numpy as np

from demo import vision_layout

PRECISION_BITS = 32 - 8 - 2
GREY = 127


def _bicubic(x):
    a = -0.5
    x = abs(x)
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    if x < 2.0:
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return 0.0


def _axis_weights(in_size, out_size):
    """(first [out], k [out, ksize]) int64: each output pixel's window start and fixed-point
    weights (zero past the window's end)."""
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = 2.0 * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    first = np.zeros(out_size, np.int64)
    k = np.zeros((out_size, ksize), np.int64)
    for o in range(out_size):
        center = (o + 0.5) * scale
        lo = max(int(center - support + 0.5), 0)  # int(): toward zero, as the C++ cast
        hi = min(int(center + support + 0.5), in_size)
        n = min(hi - lo, ksize)
        w, total = [], 0.0
        for x in range(n):
            w.append(_bicubic(((x + lo) - center + 0.5) / filterscale))
            total += w[-1]
        for x in range(n):
            v = w[x] / total if total != 0.0 else w[x]
            f = v * float(1 << PRECISION_BITS)
            k[o, x] = int(-0.5 + f if v < 0 else 0.5 + f)
        first[o] = lo
    return first, k


def _clip8(acc):
    out = np.right_shift(np.maximum(acc, 0), PRECISION_BITS)
    return np.where(acc >= (1 << PRECISION_BITS << 8), 255, out).astype(np.uint8)


def _resample_axis(img, out_size, axis):
    """One pass along axis 1 (horizontal) or 0 (vertical) of a uint8 [H, W, 3] picture."""
    in_size = img.shape[axis]
    first, k = _axis_weights(in_size, out_size)
    src = np.moveaxis(img, axis, 0).astype(np.int64)  # [in, other, 3]
    acc = np.full((out_size,) + src.shape[1:], 1 << (PRECISION_BITS - 1), np.int64)
    for t in range(k.shape[1]):
        idx = np.minimum(first + t, in_size - 1)  # past a window's end the weight is 0
        acc += src[idx] * k[:, t, None, None]
    return np.moveaxis(_clip8(acc), 0, axis)


def resize_bicubic(img, width, height):
    """PIL Image.resize((width, height), BICUBIC) of uint8 [H, W, 3], as the engine computes it."""
    img = np.asarray(img, np.uint8)
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"resize_bicubic needs uint8 [H, W, 3], got shape {img.shape}")
    if (img.shape[1], img.shape[0]) == (width, height):
        return img
    if width != img.shape[1]:
        img = _resample_axis(img, width, 1)
    if height != img.shape[0]:
        img = _resample_axis(img, height, 0)
    return img


def letterbox(img, width, height, grey=GREY):
    """PIL ImageOps.pad(image, (width, height), BICUBIC, color=grey): the largest aspect-kept resize
    that fits, centred (offset rounded half to even) on grey."""
    in_h, in_w = img.shape[:2]
    im_ratio, dest_ratio = in_w / in_h, width / height
    rw, rh = width, height
    if im_ratio > dest_ratio:
        rh = round(in_h / in_w * width)  # round(): half to even, as the engine's nearbyint
    elif im_ratio < dest_ratio:
        rw = round(in_w / in_h * height)
    rw, rh = max(rw, 1), max(rh, 1)
    resized = resize_bicubic(img, rw, rh)
    if (rw, rh) == (width, height):
        return resized
    out = np.full((height, width, 3), grey, np.uint8)
    x0 = round((width - rw) * 0.5) if rw != width else 0
    y0 = 0 if rw != width else round((height - rh) * 0.5)
    out[y0:y0 + rh, x0:x0 + rw] = resized
    return out


def processed_size(height, width, vision):
    """(height, width) the engine letterboxes a picture to; vision: {"patch", "downsample",
    "min_pixels", "max_image_tokens"} (the model config's vision section)."""
    return vision_layout.resized_size(height, width, vision["patch"], vision["downsample"],
                                      vision["min_pixels"], vision["max_image_tokens"])


def preprocess(img, vision):
    """uint8 [H, W, 3] of any size -> uint8 at its processed size, as the engine letterboxes it (the
    same array when it is already at that size)."""
    h, w = processed_size(img.shape[0], img.shape[1], vision)
    return letterbox(img, w, h)
