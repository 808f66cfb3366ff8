"""Image preprocessing size and token layout of docs/model-spec.md §8, for the demo's training data.

A "<｜deepseek_image｜>" placeholder expands to IMAGE_START, (IMAGE x n_w, IMAGE_NEW_LINE) x n_h,
IMAGE_END: n_h*(n_w+1)+2 positions, every one carrying image_token_id in input_ids; the model
overwrites their embeddings (aligner rows in reading order, learned start/newline/end vectors).
"""

import math


def resized_size(height, width, patch=14, downsample=3, min_pixels=295936, max_image_tokens=1024):
    """(height, width) after the processor's upscale-to-min_pixels, round-up and token-budget rules."""
    if height * width < min_pixels:
        scale = math.sqrt(min_pixels / (height * width))
        height, width = int(height * scale), int(width * scale)
    height, width = _round_up(height, patch), _round_up(width, patch)
    if _tokens(height, width, patch, downsample) <= max_image_tokens:
        return height, width
    cell = patch * downsample
    r = height / width
    max_w = math.sqrt((max_image_tokens - 2) / r + 0.25) - 0.5  # LLM columns that fit
    max_h = r * max_w
    ratio = min(math.floor(max_w) * cell / width, math.floor(max_h) * cell / height)
    return max(patch, int(height * ratio) // patch * patch), max(patch, int(width * ratio) // patch * patch)


def _round_up(x, m):
    return (x + m - 1) // m * m


def grid(height, width, patch=14, downsample=3):
    """(n_h, n_w): LLM image-token rows and columns for an image already at its processed size."""
    return math.ceil(height // patch / downsample), math.ceil(width // patch / downsample)


def _tokens(height, width, patch, downsample):
    n_h, n_w = grid(height, width, patch, downsample)
    return n_h * (n_w + 1) + 2


def span_length(n_h, n_w):
    return n_h * (n_w + 1) + 2
