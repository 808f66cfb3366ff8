#!/usr/bin/env python3
"""Writes the PyTorch oracle's golden files for the C++ golden tests (docs/goldens.md).

    /usr/bin/python3 tools/make_goldens.py every-role --cli build/release/bin/flashdesk-cli \
        [--out-dir tests/data/goldens/every-role]
    /usr/bin/python3 tools/make_goldens.py flash-tiny --cli build/release/bin/flashdesk-cli \
        [--out-dir tests/data/goldens/flash-tiny]

every-role: `flashdesk-cli make-random` writes the checkpoint of assets/configs/test-every-role.json
(seed SEED; the C++ test regenerates it the same way; its Engram map holds the official numpy
multipliers), then the oracle (tools/ref_logits.py) writes
  logits-{exact,bounded}.safetensors  prompt of PROMPT_LEN ids, prefill + 32 greedy steps
                                       (prompt_ids, prefill_logits, decode_*; docs/logits-dump.md)
  noise-{exact,bounded}.safetensors   the same prompt and (teacher-forced) ids through the oracle
                                       with FP32 torch-order sums (ref_logits.py --fp32-sums): how
                                       far summation order alone moves the end-to-end logits
  manifest.json                        config, seed, lengths, sha256 of the checkpoint files
flash-tiny: each prompt of FLASH_TINY_PROMPTS is rendered by `flashdesk-cli logits --prompt`
(chat template, thinking on, default effort), the oracle decodes greedily in both prefill modes,
and greedy.json records the prompt ids, the oracle's ids, each step's top-1/top-2 logit gap and
the noise band (the same ids through the oracle with FP32 torch-order sums).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ref_logits  # noqa: E402
from flashdesk_ref.config import load_config  # noqa: E402
from flashdesk_ref.safetensors import SafeTensorsFile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 11
PROMPT_LEN = 320        # > 16-slot window, > index_topk entries at ratio 2 and 1, > 6 candidate blocks
DECODE = 32
FLASH_TINY_PROMPTS = [
    "Hello! Who are you?", "What is 4821 + 3977?", "My favourite colour is teal. What can you do?",
    # 175 tokens: longer than the 128-token window, so bounded replay and the sparse path matter
    "Please remember these notes. Anna lives in Lisbon and keeps three cats. Her brother Tom "
    "repairs old bicycles in a shop near the river. The shop opens at eight and closes at six. On "
    "Fridays Tom sells fresh bread from his neighbour's bakery. Anna visits him every Sunday with a "
    "basket of oranges. Their cousin Mila studies music in Vienna and plays the violin in a small "
    "orchestra. Mila's favourite number is 7342. Last summer the three of them walked along the "
    "coast for nine days and counted forty-two lighthouses. What is Mila's favourite number?"]
FLASH_TINY_DECODE = 48


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tensors_sha256(path):
    """SHA-256 over the tensors of a safetensors file in name order (name, then raw bytes): the
    content, whatever the header's layout (tests/engine/golden_test_util.cpp computes the same)."""
    f = SafeTensorsFile(path)
    h = hashlib.sha256()
    for name in sorted(f.names()):
        h.update(name.encode("utf-8"))
        h.update(np.ascontiguousarray(f.get(name)).tobytes())
    return h.hexdigest()


def make_every_role_checkpoint(cli, model_dir):
    config = os.path.join(ROOT, "assets/configs/test-every-role.json")
    subprocess.run([cli, "make-random", "--config", config, "--out", model_dir, "--seed", str(SEED)],
                   check=True, stdout=subprocess.DEVNULL)


def write_ids(path, ids):
    with open(path, "w") as f:
        json.dump([int(i) for i in ids], f)
        f.write("\n")


def every_role(args):
    os.makedirs(args.out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        make_every_role_checkpoint(args.cli, model)
        cfg = load_config(model)
        prompt = np.random.default_rng(SEED).integers(3, cfg.vocab_size, size=PROMPT_LEN).tolist()
        ids_long = os.path.join(tmp, "long.json")
        write_ids(ids_long, prompt)
        for mode in ("exact", "bounded"):
            out = os.path.join(args.out_dir, f"logits-{mode}.safetensors")
            ref_logits.main(["--model", model, "--ids", ids_long, "--decode", str(DECODE),
                             "--prefill", mode, "--out", out])
            forced = os.path.join(tmp, f"forced-{mode}.json")
            write_ids(forced, SafeTensorsFile(out).get("decode_input_ids"))
            ref_logits.main(["--model", model, "--ids", ids_long, "--decode-ids", forced, "--prefill",
                             mode, "--fp32-sums", "--out",
                             os.path.join(args.out_dir, f"noise-{mode}.safetensors")])
            print(f"make_goldens: wrote {mode} goldens", flush=True)
        manifest = {"config": "assets/configs/test-every-role.json", "make_random_seed": SEED,
                    "engram_multipliers": "official: numpy default_rng(10007 * layer)",
                    "prompt": f"numpy default_rng({SEED}).integers(3, vocab_size, {PROMPT_LEN})",
                    "prompt_len": PROMPT_LEN, "decode_steps": DECODE,
                    "sha256": {"model.safetensors": sha256(os.path.join(model, "model.safetensors"))},
                    "tensors_sha256": {"engram_map.safetensors":
                                       tensors_sha256(os.path.join(model, "engram_map.safetensors"))},
                    "command": "/usr/bin/python3 tools/make_goldens.py every-role --cli CLI"}
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


def top2_gaps(logits):
    part = np.sort(logits, axis=-1)
    return (part[:, -1] - part[:, -2]).astype(float).tolist()


def oracle_rows(path):
    """[steps, V] logits of a logits file: the last prefill row, then each decode step."""
    f = SafeTensorsFile(path)
    return np.concatenate([np.array(f.get("prefill_logits"), np.float32)[-1:],
                           np.array(f.get("decode_logits"), np.float32)])


def flash_tiny_mode(model, ids_path, mode, tmp):
    """The oracle's greedy ids in one prefill mode, its top-2 gaps, and its noise band: the same
    ids teacher-forced through the oracle with FP32 torch-order sums."""
    out, noisy = os.path.join(tmp, "greedy.safetensors"), os.path.join(tmp, "noise.safetensors")
    ref_logits.main(["--model", model, "--ids", ids_path, "--decode", str(FLASH_TINY_DECODE),
                     "--prefill", mode, "--out", out])
    f = SafeTensorsFile(out)
    greedy = [int(v) for v in f.get("decode_input_ids")] + [int(f.get("decode_argmax")[-1])]
    forced = os.path.join(tmp, "forced.json")
    write_ids(forced, greedy[:-1])
    ref_logits.main(["--model", model, "--ids", ids_path, "--decode-ids", forced, "--prefill", mode,
                     "--fp32-sums", "--out", noisy])
    rows, other = oracle_rows(out), oracle_rows(noisy)
    flips = np.nonzero(rows.argmax(-1) != other.argmax(-1))[0]
    return {"ids": greedy, "gaps": top2_gaps(rows),
            "noise_max_abs": float(np.abs(rows - other).max()),
            "noise_first_flip": int(flips[0]) if flips.size else len(rows)}


def flash_tiny(args):
    model = os.path.join(ROOT, "assets/models/flash-tiny")
    os.makedirs(args.out_dir, exist_ok=True)
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(FLASH_TINY_PROMPTS):
            rendered = os.path.join(tmp, f"prompt{i}.safetensors")
            subprocess.run([args.cli, "logits", "--model", model, "--prompt", text, "--out", rendered],
                           check=True, stdout=subprocess.DEVNULL)
            ids = [int(v) for v in SafeTensorsFile(rendered).get("prompt_ids")]
            ids_path = os.path.join(tmp, f"ids{i}.json")
            write_ids(ids_path, ids)
            case = {"prompt": text, "prompt_ids": ids}
            for mode in ("exact", "bounded"):
                case[mode] = flash_tiny_mode(model, ids_path, mode, tmp)
                print(f"make_goldens: flash-tiny prompt {i} {mode}: noise band "
                      f"{case[mode]['noise_max_abs']:.3f}, first flip {case[mode]['noise_first_flip']}",
                      flush=True)
            cases.append(case)
    doc = {"model": "assets/models/flash-tiny", "template": "flashdesk-cli logits --prompt (thinking on, "
           "effort high)", "steps": FLASH_TINY_DECODE + 1,
           "ids": "the greedy ids: argmax of the prefill, then of each decode step (EOS not special)",
           "gaps": "top-1 minus top-2 logit of the oracle at each of those steps",
           "noise_max_abs": "the largest logit difference along those ids between the oracle and "
                            "the oracle with FP32 torch-order sums (teacher-forced)",
           "noise_first_flip": "the first step where their argmax differs (steps = none)",
           "command": "/usr/bin/python3 tools/make_goldens.py flash-tiny --cli CLI",
           "cases": cases}
    with open(os.path.join(args.out_dir, "greedy.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Golden files of the PyTorch oracle for the C++ tests")
    ap.add_argument("which", choices=("every-role", "flash-tiny"))
    ap.add_argument("--cli", required=True, help="the built flashdesk-cli")
    ap.add_argument("--out-dir")
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args(argv)
    args.out_dir = args.out_dir or os.path.join(ROOT, "tests/data/goldens", args.which)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    {"every-role": every_role, "flash-tiny": flash_tiny}[args.which](args)


if __name__ == "__main__":
    main()
