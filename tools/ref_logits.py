#!/usr/bin/env python3
"""The PyTorch oracle's counterpart of `flashdesk-cli logits`: prefill + decode steps on a model
directory, writing the safetensors file of docs/logits-dump.md.

    /usr/bin/python3 tools/ref_logits.py --model DIR --ids FILE [--decode N | --decode-ids FILE]
        [--all-positions] [--prefill exact|bounded] [--dump] [--block-inputs FILE] --out FILE
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from flashdesk_ref.safetensors import FormatError, SafeTensorsFile, decode_float, write_safetensors  # noqa: E402

ENGINE = "flashdesk_ref 0.1 (PyTorch oracle, tools/flashdesk_ref)"


def read_ids(path):
    """A JSON array or whitespace-separated integers."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SystemExit(f"ref_logits: cannot read {path}: {e}")
    try:
        ids = json.loads(text) if text.lstrip().startswith("[") else [int(t) for t in text.split()]
    except (ValueError, json.JSONDecodeError) as e:
        raise SystemExit(f"ref_logits: {path}: not a JSON array or whitespace-separated integers ({e})")
    if not all(isinstance(i, int) for i in ids):
        raise SystemExit(f"ref_logits: {path}: every id must be an integer")
    return ids


def parse_args(argv):
    ap = argparse.ArgumentParser(description="PyTorch oracle logits and per-block dumps")
    ap.add_argument("--model", required=True)
    ap.add_argument("--ids")
    ap.add_argument("--prompt", help="not supported by the oracle (it has no tokenizer)")
    ap.add_argument("--image", help="not supported by the oracle (no vision tower)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--decode", type=int, default=0, help="greedy decode steps")
    group.add_argument("--decode-ids", help="teacher-forced ids, one step each")
    ap.add_argument("--all-positions", action="store_true")
    ap.add_argument("--prefill", choices=("exact", "bounded"), default="bounded")
    ap.add_argument("--dump", action="store_true")
    ap.add_argument("--block-inputs")
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = leave torch's default)")
    ap.add_argument("--device", default="cpu", help="torch device for weights and state (cpu, cuda, ...)")
    ap.add_argument("--fp32-sums", action="store_true",
                    help="FP32 sums in torch's order instead of correctly rounded ones: another "
                         "faithful implementation, to measure how far summation order alone moves results")
    args = ap.parse_args(argv)
    if args.prompt is not None or args.image is not None:
        ap.error("--prompt/--image are not supported by the oracle: tokenise with "
                 "`flashdesk-cli` and pass --ids (images need the vision tower, not implemented here)")
    if args.ids is None and args.block_inputs is None:
        ap.error("--ids FILE is required (or --block-inputs FILE, which carries the ids)")
    if args.decode < 0:
        ap.error("--decode must be >= 0")
    return args


class BlockInputs:
    """Replaces each block's input by another implementation's recorded one (--block-inputs)."""

    def __init__(self, path, cfg):
        self.file = SafeTensorsFile(path)
        self.cfg = cfg
        need = ["prompt_ids", "prefill_embed", "prefill_block_out", "prefill_block_pre_mix"]
        missing = [n for n in need if n not in self.file.header]
        if missing:
            raise FormatError(f"{path}: --block-inputs needs a --dump file; missing {missing}")
        self.prompt = [int(i) for i in self.file.get("prompt_ids")]
        self.decode_ids = ([int(i) for i in self.file.get("decode_input_ids")]
                           if "decode_input_ids" in self.file.header else [])
        self.decode_step = None  # None = prefill, else the decode step index

    def _get(self, name):
        import torch
        # decode_float: a BF16 dump (the official goldens store block outputs as BF16) holds bit
        # patterns, not numbers
        return torch.from_numpy(np.array(decode_float(self.file.dtype(name), self.file.get(name))))

    def __call__(self, layer, step):
        import torch
        cfg = self.cfg
        hc = cfg.hc_mult
        t = self.decode_step
        if layer == 0:
            if t is None:
                emb = self._get("prefill_embed")
            elif "decode_embed" in self.file.header:
                emb = self._get("decode_embed")[t]
            else:
                return None
            X = emb[:, None, :].expand(emb.shape[0], hc, emb.shape[1]).clone()
            pre = torch.zeros(emb.shape[0], hc)
            pre[:, 0] = 1.0
            return X, pre
        if t is None:
            self._check_rows(layer - 1, step)
            return self._get("prefill_block_out")[layer - 1], self._get("prefill_block_pre_mix")[layer - 1]
        return self._get("decode_block_out")[t, layer - 1], self._get("decode_block_pre_mix")[t, layer - 1]

    def _check_rows(self, layer, step):
        """Block `layer` must have run every row the next block reads (all of them, except
        past the first decoder layer in bounded mode, where the tail from window_start)."""
        if "prefill_positions_run" not in self.file.header:
            return
        run = np.array(self.file.get("prefill_positions_run"))[layer]
        if not run[step.window_start:].all():
            raise FormatError(f"{self.file.path}: block {layer} did not run every position this "
                              "prefill mode needs (was it written in bounded mode?)")


def main(argv=None):
    args = parse_args(argv)
    import torch
    from flashdesk_ref import dump
    from flashdesk_ref.checkpoint import Checkpoint
    from flashdesk_ref.model import Model
    from flashdesk_ref.ops import Rounding

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        rounding = Rounding(exact_sums=not args.fp32_sums)
        model = Model(Checkpoint(args.model), device=args.device, rounding=rounding)
        cfg = model.cfg
        overrides = BlockInputs(args.block_inputs, cfg) if args.block_inputs else None
    except FormatError as e:
        raise SystemExit(f"ref_logits: {e}")
    prompt = read_ids(args.ids) if args.ids else overrides.prompt
    forced = read_ids(args.decode_ids) if args.decode_ids else None
    if overrides is not None:
        if args.ids and prompt != overrides.prompt:
            raise SystemExit("ref_logits: --ids differ from the --block-inputs file's prompt_ids")
        forced = overrides.decode_ids if forced is None else forced
        if forced != overrides.decode_ids:
            raise SystemExit("ref_logits: --decode-ids differ from the --block-inputs file's decode_input_ids")
    if args.all_positions and args.prefill == "bounded":
        raise SystemExit("ref_logits: --all-positions needs --prefill exact (bounded mode computes "
                         "no logits before the tail)")
    steps = len(forced) if forced is not None else args.decode

    state = model.new_state()
    out = {"prompt_ids": ("I64", np.array(prompt, dtype=np.int64))}
    trace = dump.Trace(len(prompt)) if args.dump else None
    try:
        logits = model.step(state, prompt, bounded=args.prefill == "bounded", trace=trace,
                            overrides=overrides, all_logits=args.all_positions)
    except ValueError as e:
        raise SystemExit(f"ref_logits: {e}")
    out["prefill_logits"] = ("F32", logits.cpu().numpy())
    if args.dump:
        out.update(dump.to_file_tensors("prefill_", dump.step_tensors(trace, cfg.num_hidden_layers)))
        out.update(dump.to_file_tensors("prefill_", dump.cache_tensors(state)))

    inputs, rows, step_dicts = [], [], []
    last = logits[-1]
    for t in range(steps):
        token = forced[t] if forced is not None else int(np.argmax(last.cpu().numpy()))
        trace = dump.Trace(1) if args.dump else None
        if overrides is not None:
            overrides.decode_step = t
        try:
            last = model.step(state, [token], trace=trace, overrides=overrides)[-1]
        except ValueError as e:
            raise SystemExit(f"ref_logits: decode step {t}: {e}")
        inputs.append(token)
        rows.append(last.cpu().numpy())
        if args.dump:
            step_dicts.append(dump.step_tensors(trace, cfg.num_hidden_layers))
    if steps:
        logits_t = np.stack(rows)
        out["decode_logits"] = ("F32", logits_t)
        out["decode_input_ids"] = ("I64", np.array(inputs, dtype=np.int64))
        out["decode_positions"] = ("I64", np.arange(len(prompt), len(prompt) + steps, dtype=np.int64))
        out["decode_argmax"] = ("I64", np.argmax(logits_t, axis=-1).astype(np.int64))
        if args.dump:
            entries = {l: s.entries for l, s in state.sources.items()}
            out.update(dump.to_file_tensors("decode_", dump.decode_tensors(step_dicts, entries)))
            out.update(dump.to_file_tensors("decode_", dump.cache_tensors(state)))
    meta = {"engine": ENGINE, "prefill_mode": args.prefill, "config_name": cfg.name,
            "all_positions": "true" if args.all_positions else "false"}
    write_safetensors(args.out, out, meta)


if __name__ == "__main__":
    main()
