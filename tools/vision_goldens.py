#!/usr/bin/env python3
"""Golden vision outputs for the C++ tests (tests/engine/vision_golden_test.cpp), from the
trainer's PyTorch vision tower (tools/train/vision.py, FP32 emulation of its BF16 numerics), PIL's
ImageOps.pad for the preprocessing and the PyTorch oracle (tools/flashdesk_ref) for the logits.

    /usr/bin/python3 tools/vision_goldens.py [--model assets/models/flash-tiny]
        [--out tests/data/vision]

Writes into OUT:
  shapes-500x300.png   a fixed synthetic picture that needs the token budget, a bicubic resize
                       and a letterbox (the demo images are already at their processed size)
  oriented-6.jpg       a JPEG stored rotated, with EXIF orientation 6 (decode tests)
  tiny.{bmp,gif,tga,png} a 4x3 picture of exact colours (TINY) in each stb format
  tiny.webp            the same, lossless WebP
  shapes-500x300.webp  the PNG as lossy WebP; shapes-500x300.webp.png: PIL's decode of it
  alpha.webp           lossless WebP with alpha (colours kept under transparent pixels);
                       alpha.webp.png: PIL's convert("RGB") of it (alpha dropped, as the
                       reference image_processor does)
  animated.webp        two frames (the engine reads still WebP only)
  image-0.webp         assets/eval/demo/images/image-0.png as lossless WebP (the CLI test asks
                       the demo model about both files)
  vision-golden.safetensors, per image i (0: assets/eval/demo/images/image-0.png, 1: the PNG):
    image1.pixels     U8 [H, W, 3]  the letterboxed image (PIL ImageOps.pad, bicubic)
    image{i}.features BF16 [P, d]   ViT output after the final norm
    image{i}.span     BF16 [span, dim] whole span embeddings (start, aligner rows + newline, end)
    image{i}.prompt_ids I32 [T]     the chat prompt (thinking, effort 75) with the span expanded
    image{i}.span_first I32 [1]     index of IMAGE_START in prompt_ids
    image{i}.logits   F32 [V]       oracle logits of the last prompt position (exact prefill)
    image{i}.noise    F32 [2]       the oracle's own summation-order noise on those logits: max |diff|
                                    / max |logit| and cosine against the same oracle with FP32
                                    torch-order sums (ref_logits.py --fp32-sums)
    image{i}.layer0_expert_ids I32 [T, k]  the oracle's routed experts at layer 0 (bias_vl on
                                    the span)
    image{i}.engram_hash_ids I64 [T, engram layers, 24]  the oracle's Engram ids (span dead)
    jpeg.pixels       U8 [32, 64, 3]  oriented-6.jpg as PIL decodes and exif_transposes it
  image0-blocks.safetensors: the oracle's per-block tensors of image 0's prompt (the span rows
    above as the image embeddings), in the dump layout of docs/logits-dump.md: prompt_ids,
    prefill_embed [T, D] and prefill_block_out [L, T, hc, D] (BF16-valued, stored BF16),
    prefill_block_pre_mix [L, T, hc], prefill_positions_run [L, T]: the engine's blocks are fed
    these inputs and compared block by block (the end-to-end logits of a trained model are
    chaotic in summation order: see image{i}.noise); prefill_block_noise F32 [L]: the same
    oracle with FP32 torch-order sums fed these block inputs, each block's error against them
    (the test's measure), so the size of a rounding tie's flip on this prompt
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageOps

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "demo"))  # "from demo import ..." and the demo modules

from compare_logits import block_errors_prefill  # noqa: E402
from demo import chat_format, make_dataset, vision_layout  # noqa: E402
from flashdesk_ref.checkpoint import Checkpoint  # noqa: E402
from flashdesk_ref.dump import Trace, step_tensors  # noqa: E402
from flashdesk_ref.ops import Rounding  # noqa: E402
from flashdesk_ref.model import Model  # noqa: E402
from flashdesk_ref.safetensors import write_safetensors  # noqa: E402
from train.config import load_model_config  # noqa: E402
from train.numerics import Numerics  # noqa: E402
from train.vision import Aligner, VisionTower, image_span_rows  # noqa: E402

QUESTIONS = ("How many shapes are there?", "What colour is the circle?")


def synthetic_png(path):
    """500x300: a red circle, a blue square and a green triangle on white (deterministic)."""
    im = Image.new("RGB", (500, 300), (255, 255, 255))
    d = ImageDraw.Draw(im)
    d.ellipse((40, 60, 180, 200), fill=(220, 30, 30))
    d.rectangle((230, 40, 330, 140), fill=(30, 60, 220))
    d.polygon([(380, 250), (470, 250), (425, 160)], fill=(30, 170, 60))
    im.save(path, format="PNG")


def oriented_jpeg(path):
    """Displayed: 64x32, left half red, right half blue, top-left 16x16 corner green. Stored rotated
    by 90 degrees counter-clockwise (32x64) with EXIF orientation 6 (rotate 90 clockwise to show)."""
    shown = Image.new("RGB", (64, 32), (230, 20, 20))
    ImageDraw.Draw(shown).rectangle((32, 0, 63, 31), fill=(20, 20, 230))
    ImageDraw.Draw(shown).rectangle((0, 0, 15, 15), fill=(20, 200, 20))
    stored = shown.transpose(Image.Transpose.ROTATE_90)
    exif = Image.Exif()
    exif[0x0112] = 6
    stored.save(path, format="JPEG", quality=95, exif=exif.tobytes())
    assert ImageOps.exif_transpose(Image.open(path)).size == (64, 32)


TINY = [[(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)],
        [(0, 0, 0), (255, 255, 0), (0, 255, 255), (255, 0, 255)],
        [(128, 128, 128), (10, 20, 30), (200, 100, 50), (1, 2, 3)]]


def tiny_formats(out):
    """tiny.{bmp,gif,tga,png}: the 4x3 TINY picture (exact colours) in each stb format."""
    im = Image.fromarray(np.asarray(TINY, np.uint8), "RGB")
    for ext, fmt in (("bmp", "BMP"), ("gif", "GIF"), ("tga", "TGA"), ("png", "PNG")):
        im.save(os.path.join(out, "tiny." + ext), format=fmt)


def webp_files(out, png):
    """The WebP pictures of the docstring: the decoder's expected pixels are PIL's (libwebp)."""
    im = Image.fromarray(np.asarray(TINY, np.uint8), "RGB")
    im.save(os.path.join(out, "tiny.webp"), format="WEBP", lossless=True)
    lossy = os.path.join(out, "shapes-500x300.webp")
    Image.open(png).convert("RGB").save(lossy, format="WEBP", quality=75)
    Image.open(lossy).convert("RGB").save(lossy + ".png", format="PNG")
    alpha = np.concatenate([np.asarray(TINY, np.uint8), np.full((3, 4, 1), 255, np.uint8)], axis=2)
    alpha[0, :, 3] = 0
    alpha[1, 1, 3] = 128
    path = os.path.join(out, "alpha.webp")
    Image.fromarray(alpha, "RGBA").save(path, format="WEBP", lossless=True, exact=True)
    Image.open(path).convert("RGB").save(path + ".png", format="PNG")
    demo = Image.open(os.path.join(REPO, "assets", "eval", "demo", "images", "image-0.png")).convert("RGB")
    demo.save(os.path.join(out, "image-0.webp"), format="WEBP", lossless=True)
    frames = [Image.new("RGB", (8, 8), c) for c in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(os.path.join(out, "animated.webp"), format="WEBP", save_all=True,
                   append_images=frames[1:], lossless=True, duration=100)


def preprocess(path, vc):
    im = Image.open(path).convert("RGB")
    h, w = vision_layout.resized_size(im.height, im.width, vc.patch_size, vc.downsample_ratio,
                                      vc.min_pixels, vc.max_image_tokens)
    img = np.asarray(ImageOps.pad(im, (w, h), method=Image.Resampling.BICUBIC, color=(127, 127, 127)))
    p = vc.patch_size
    x = (img.astype(np.float32) / 255.0 - 0.5) / 0.5
    vh, vw = h // p, w // p
    patches = x.transpose(2, 0, 1).reshape(3, vh, p, vw, p).transpose(1, 3, 0, 2, 4)
    patches = torch.from_numpy(patches.reshape(vh * vw, 3 * p * p).copy()).to(torch.bfloat16).float()
    return img, patches, vh, vw


def block_noise(t, other):
    """Per block, the error of `other` against `t` by compare_logits' measure (the one
    vision_golden_test.cpp applies to the engine), here between two oracles fed the same inputs."""
    def dump(x):
        return {"prefill_block_out": x["block_out"], "prefill_embed": x["embed"]}
    return np.nan_to_num(np.asarray(block_errors_prefill(dump(t), dump(other)), np.float32))


def write_blocks(dest, trace, ids, n_layers, noise):
    """The per-block golden of one prompt (see the docstring): BF16 where the values are."""
    t = step_tensors(trace, n_layers)
    out = {"prompt_ids": ("I64", np.asarray(ids, np.int64)),
           "prefill_positions_run": ("U8", np.ascontiguousarray(t["positions_run"]))}
    for name in ("embed", "block_out"):
        value = torch.from_numpy(np.ascontiguousarray(t[name]))
        assert torch.equal(value.to(torch.bfloat16).float(), value), name + " is not bf16-valued"
        bits = value.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        out["prefill_" + name] = ("BF16", np.ascontiguousarray(bits))
    out["prefill_block_pre_mix"] = ("F32", np.ascontiguousarray(t["block_pre_mix"], np.float32))
    out["prefill_block_noise"] = ("F32", np.ascontiguousarray(noise, np.float32))
    write_safetensors(dest, out, metadata={"script": "tools/vision_goldens.py"})


def load_tower(ckpt, cfg):
    vc = cfg.vision
    tower, aligner = VisionTower(vc), Aligner(vc, cfg.hidden_size)
    for module, prefix in ((tower, "vision."), (aligner, "aligner.")):
        state = {k: ckpt[prefix + k].float() for k in module.state_dict()}
        module.load_state_dict(state)
    delims = {n: ckpt[n].float() for n in ("image_start", "image_newline", "image_end")}
    return tower, aligner, delims


def prompt_ids(tok, question, n_h, n_w):
    messages = [{"role": "user", "content": [{"type": "image", "path": "x"},
                                             {"type": "text", "text": question}]}]
    ids = tok.encode(chat_format.render_prompt(messages, "thinking", 75))
    image_id = tok.token_id(chat_format.IMAGE)
    first = ids.index(image_id)
    span = vision_layout.span_length(n_h, n_w)
    return ids[:first] + [image_id] * span + ids[first + 1:], first, span


def stored(name, t):
    """(dtype, array) for write_safetensors; features and spans hold bf16 values: stored BF16."""
    if isinstance(t, np.ndarray):
        return {np.uint8: "U8", np.int32: "I32", np.int64: "I64"}[t.dtype.type], t
    if name in ("features", "span"):
        bits = t.contiguous().to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        assert torch.equal(t.to(torch.bfloat16).float(), t), name + " is not bf16-valued"
        return "BF16", np.ascontiguousarray(bits)
    return "F32", np.ascontiguousarray(t.float().numpy())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(REPO, "assets", "models", "flash-tiny"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "vision"))
    ap.add_argument("--pictures-only", action="store_true",
                    help="write the test pictures (not the model's goldens) and stop")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    png = os.path.join(args.out, "shapes-500x300.png")
    synthetic_png(png)
    oriented_jpeg(os.path.join(args.out, "oriented-6.jpg"))
    tiny_formats(args.out)
    webp_files(args.out, png)
    if args.pictures_only:
        return
    cfg = load_model_config(args.model)
    ckpt = Checkpoint(args.model)
    tower, aligner, delims = load_tower(ckpt, cfg)
    model = Model(ckpt)
    # The same oracle with FP32 torch-order sums: how far its logits move with summation order
    # alone (FP8/FP4 codes and routing flip on last-bit differences and the flips spread).
    model_fp32_sums = Model(ckpt, rounding=Rounding(exact_sums=False))
    tok = make_dataset.load_tokenizer(os.path.join(args.model, "tokenizer.json"))
    num = Numerics(emulate_fp32=True, qat=False)
    out = {}
    images = [os.path.join(REPO, "assets", "eval", "demo", "images", "image-0.png"), png]
    with torch.no_grad():
        for i, path in enumerate(images):
            img, patches, vh, vw = preprocess(path, cfg.vision)
            feats = tower(num, patches[None], vh, vw)
            rows = aligner(num, feats, vh, vw)
            n_h, n_w = vision_layout.grid(img.shape[0], img.shape[1], cfg.vision.patch_size,
                                          cfg.vision.downsample_ratio)
            span = image_span_rows(num, rows, n_h, n_w, delims["image_start"],
                                   delims["image_newline"], delims["image_end"])[0]
            ids, first, length = prompt_ids(tok, QUESTIONS[i], n_h, n_w)
            dead = [first <= j < first + length for j in range(len(ids))]
            trace = Trace(len(ids))
            logits = model.step(model.new_state(), ids, bounded=False, dead=dead,
                                image_rows=[(first, span)], trace=trace)[0]
            other = model_fp32_sums.step(model_fp32_sums.new_state(), ids, bounded=False, dead=dead,
                                         image_rows=[(first, span)])[0]
            a, b = np.asarray(other, np.float64), np.asarray(logits, np.float64)
            noise = np.asarray([np.abs(a - b).max() / np.abs(b).max(),
                                (a @ b) / np.sqrt((a @ a) * (b @ b))], np.float32)
            experts = trace.rows("expert_ids", 0, np.int32, -1)
            hashes = trace.rows("engram_hash_ids", None, np.int64, -1)
            named = [("features", feats[0]), ("span", span),
                            ("prompt_ids", np.asarray(ids, np.int32)),
                     ("span_first", np.asarray([first], np.int32)), ("logits", logits),
                     ("noise", torch.from_numpy(noise)),
                     ("layer0_expert_ids", experts), ("engram_hash_ids", hashes)]
            if i == 0:
                # the FP32-sums oracle fed the exact oracle's block inputs, block by block
                exact = step_tensors(trace, cfg.num_hidden_layers)

                def exact_inputs(layer, step):
                    if layer == 0:
                        return None
                    return (torch.from_numpy(exact["block_out"][layer - 1]),
                            torch.from_numpy(exact["block_pre_mix"][layer - 1]))

                forced = Trace(len(ids))
                model_fp32_sums.step(model_fp32_sums.new_state(), ids, bounded=False, dead=dead,
                                     image_rows=[(first, span)], trace=forced,
                                     overrides=exact_inputs)
                noise_blocks = block_noise(exact, step_tensors(forced, cfg.num_hidden_layers))
                write_blocks(os.path.join(args.out, "image0-blocks.safetensors"), trace, ids,
                             cfg.num_hidden_layers, noise_blocks)
                print("image0: the FP32-sums oracle's block errors fed the exact one's inputs: "
                      + " ".join(f"{v:.2e}" for v in noise_blocks))
            if i == 1:  # image 0 is already at its processed size: its pixels are the file's
                named.append(("pixels", np.ascontiguousarray(img)))
            for name, t in named:
                out[f"image{i}.{name}"] = stored(name, t)
            print(f"image{i}: {os.path.relpath(path, REPO)} -> {img.shape[1]}x{img.shape[0]}, "
                  f"grid {n_h}x{n_w}, {len(ids)} prompt ids, top token {int(logits.argmax())}, "
                  f"oracle noise {noise[0]:.3f} (cosine {noise[1]:.4f})")
    shown = ImageOps.exif_transpose(Image.open(os.path.join(args.out, "oriented-6.jpg")))
    out["jpeg.pixels"] = ("U8", np.ascontiguousarray(np.asarray(shown.convert("RGB"))))
    dest = os.path.join(args.out, "vision-golden.safetensors")
    write_safetensors(dest, out, metadata={"script": "tools/vision_goldens.py",
                                           "model": os.path.basename(args.model.rstrip("/"))})
    print(f"vision_goldens: wrote {dest}")
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("# Vision test data\n\nWritten by `/usr/bin/python3 tools/vision_goldens.py` "
                "(see its docstring for every tensor); regenerate after retraining flash-tiny. "
                "`--pictures-only` writes the pictures (the tiny formats, the WebP files and PIL's "
                "decodes of them) without the model's goldens.\n"
                "`png-empty-idat-first.png` and `png-empty-idat-cut.png` are not written by it: inputs image_decode_fuzz "
                "found (an empty IDAT chunk first; a file cut inside one), kept for `ImageDecode.EmptyIdatChunksAreHarmless`.\n")


if __name__ == "__main__":
    main()
