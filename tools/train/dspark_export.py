"""Export of a trained DSpark head (dspark_head.DsparkHead) in the published layout beside a
target checkpoint: the `mtp.*` tensors in a shard of their own (model-dspark.safetensors), the
target's model.safetensors.index.json with their entries added, and its config.json with the
stages' keys (num_nextn_predict_layers, dspark_*, three window-only compress_ratios). The dtypes
are the engine's (engine/checkpoint/tensor_spec.cpp add_dspark): FP8 32x32 for the attention,
shared-expert and main_proj linears, packed FP4 for routed experts, F32 for the mHC parameters,
attn_sink and gate biases, BF16 for the rest. The codes are those of the QAT forward.

    write_head(head, target_dir, out_dir)   # the three files (what the GPU run brings back)
    install(head_dir, target_dir, model_dir)  # a loadable model: target files + the head's
    ship(head_dir, target_dir)              # the head into target_dir itself
    load_head(head, model_dir)              # dequantised values back into a DsparkHead

From the command line (a model directory the engine loads, the target's files linked):
    python3 tools/train/dspark_export.py install HEAD_DIR MODEL_DIR [--target DIR] [--copy]
or into the target directory itself (how assets/models/flash-tiny got its head):
    python3 tools/train/dspark_export.py ship HEAD_DIR [--target DIR]
"""
import argparse
import json
import os
import re
import shutil
import sys

import torch

if __package__ in (None, ""):   # run as a script: tools/ on the path, then the package import
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    __package__ = "train"
from .export import _bf16, _fp4, _fp8  # noqa: E402
from flashdesk_ref.safetensors import _read_header, write_safetensors  # noqa: E402

SHARD = "model-dspark.safetensors"
HEAD_FILES = ("config.json", "model.safetensors.index.json", SHARD)
FP8 = re.compile(r"(attn\.(wq_a|wq_b|wkv|wo_a|wo_b)|ffn\.shared_experts\.w[123]|main_proj)\.weight$")
F32 = re.compile(r"(hc_(attn|ffn)_(fn|base|scale)|attn\.attn_sink|ffn\.gate\.bias(_vl)?)$")
EXPERTS = re.compile(r"^(mtp\.\d+\.ffn)\.experts_(w[123])$")


def head_tensors(head, block=32):
    """{checkpoint name: (dtype, numpy array)} of the head's mtp.* tensors."""
    out = {}
    for name, t in head.state_dict().items():
        if not name.startswith("stages."):
            continue
        name = "mtp." + name[len("stages."):]
        m = EXPERTS.match(name)
        if m:
            for e in range(t.shape[0]):
                out.update(_fp4(f"{m.group(1)}.experts.{e}.{m.group(2)}", t[e]))
        elif FP8.search(name):
            out.update(_fp8(name, t, block))
        elif F32.search(name):
            out[name] = ("F32", t.detach().float().cpu().numpy())
        else:
            out[name] = _bf16(t)
    return out


def head_config(target_raw, dcfg, cfg):
    raw = json.loads(json.dumps(target_raw))
    t = raw["text_config"]
    t.update(dcfg.keys(cfg))
    t["compress_ratios"] = list(t["compress_ratios"])[:cfg.num_hidden_layers] + [0] * dcfg.stages
    return raw


def target_tensor_bytes(target_dir, weight_map):
    """The data bytes of weight_map's tensors (an index's total_size), from the shard headers:
    not the files' sizes, which add the headers, and not the target index's total, which counts a
    head the target may already ship."""
    total = 0
    for shard in sorted(set(weight_map.values())):
        header, _, _ = _read_header(os.path.join(target_dir, shard))
        for name, entry in header.items():
            if weight_map.get(name) == shard:
                total += entry["data_offsets"][1] - entry["data_offsets"][0]
    return total


def write_head(head, target_dir, out_dir):
    """Writes HEAD_FILES for `head` trained against the checkpoint in target_dir."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = head_tensors(head, head.cfg.weight_block)
    write_safetensors(os.path.join(out_dir, SHARD), tensors, {"format": "pt"})
    with open(os.path.join(target_dir, "model.safetensors.index.json")) as f:
        index = json.load(f)
    wm = {n: s for n, s in index["weight_map"].items() if not n.startswith("mtp.")}
    total = target_tensor_bytes(target_dir, wm)
    for n, (_, arr) in tensors.items():
        wm[n] = SHARD
        total += arr.nbytes
    index = {"metadata": dict(index.get("metadata", {}), total_size=int(total)), "weight_map": wm}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=1)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(head_config(head.cfg.raw, head.dcfg, head.cfg), f, indent=2)
        f.write("\n")


def install(head_dir, target_dir, model_dir, link=False):
    """model_dir = target_dir's files with the head's three files in place of its own."""
    os.makedirs(model_dir, exist_ok=True)
    for name in os.listdir(target_dir):
        if name in HEAD_FILES:
            continue
        src, dst = os.path.join(target_dir, name), os.path.join(model_dir, name)
        if os.path.lexists(dst):
            os.remove(dst)
        if link:
            os.symlink(os.path.abspath(src), dst)
        else:
            shutil.copyfile(src, dst)
    for name in HEAD_FILES:
        src = os.path.join(head_dir, name)
        if not os.path.exists(src):
            raise FileNotFoundError(f"{head_dir}: no {name} (not a DSpark head export)")
        dst = os.path.join(model_dir, name)
        if os.path.lexists(dst):
            os.remove(dst)
        shutil.copyfile(src, dst)


DSPARK_KEYS = ("num_nextn_predict_layers", "dspark_block_size", "dspark_noise_token_id",
               "dspark_target_layer_ids", "dspark_markov_rank", "dspark_n_routed_experts",
               "dspark_num_experts_per_tok")


def _target_view(raw):
    """A config as the target alone: no stage keys, one compress ratio per main layer."""
    raw = json.loads(json.dumps(raw))
    t = raw["text_config"]
    for key in DSPARK_KEYS:
        t.pop(key, None)
    t["compress_ratios"] = list(t["compress_ratios"])[:t["num_hidden_layers"]]
    return raw


def ship(head_dir, target_dir):
    """Installs the head into target_dir itself (the model that ships it): its shard copied in,
    its config and index in place of the target's. Refused when the head was not exported against
    this target (other main config or other main tensors), so nothing of the target changes but
    the head's entries. Replaces a head the target already ships."""
    for name in HEAD_FILES:
        if not os.path.exists(os.path.join(head_dir, name)):
            raise FileNotFoundError(f"{head_dir}: no {name} (not a DSpark head export)")
    with open(os.path.join(head_dir, "config.json")) as f:
        head_raw = json.load(f)
    with open(os.path.join(target_dir, "config.json")) as f:
        target_raw = json.load(f)
    if _target_view(head_raw) != _target_view(target_raw):
        raise ValueError(f"{head_dir}/config.json: the main model's keys differ from "
                         f"{target_dir}/config.json (a head trained against another target)")
    with open(os.path.join(head_dir, "model.safetensors.index.json")) as f:
        head_index = json.load(f)
    with open(os.path.join(target_dir, "model.safetensors.index.json")) as f:
        target_index = json.load(f)
    main = {n: s for n, s in target_index["weight_map"].items() if not n.startswith("mtp.")}
    head_main = {n: s for n, s in head_index["weight_map"].items() if not n.startswith("mtp.")}
    if head_main != main:
        raise ValueError(f"{head_dir}/model.safetensors.index.json: the main tensors' shards "
                         f"differ from {target_dir}'s (a head exported beside another target)")
    head_header, _, _ = _read_header(os.path.join(head_dir, SHARD))
    wm = dict(main)
    for name in head_header:
        wm[name] = SHARD
    total = target_tensor_bytes(target_dir, main) + sum(
        e["data_offsets"][1] - e["data_offsets"][0] for e in head_header.values())
    index = {"metadata": dict(target_index.get("metadata", {}), total_size=int(total)),
             "weight_map": dict(sorted(wm.items()))}
    for name in HEAD_FILES:   # never write through a link into another directory
        if os.path.islink(os.path.join(target_dir, name)):
            os.remove(os.path.join(target_dir, name))
    shutil.copyfile(os.path.join(head_dir, SHARD), os.path.join(target_dir, SHARD))
    with open(os.path.join(target_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=1)
    shutil.copyfile(os.path.join(head_dir, "config.json"), os.path.join(target_dir, "config.json"))


def load_head(head, model_dir):
    """Dequantised mtp.* values of model_dir into `head` (QAT re-quantises them to the same
    codes)."""
    from flashdesk_ref.checkpoint import Checkpoint
    ck = Checkpoint(model_dir)
    new = {}
    for name, t in head.state_dict().items():
        ck_name = "mtp." + name[len("stages."):]
        m = EXPERTS.match(ck_name)
        if m:
            new[name] = torch.stack([ck[f"{m.group(1)}.experts.{e}.{m.group(2)}.weight"]
                                     for e in range(t.shape[0])]).float()
        else:
            new[name] = ck[ck_name].float().reshape(t.shape)
    head.load_state_dict(new)
    return ck


def main(argv=None):
    ap = argparse.ArgumentParser(description="installs a DSpark head export beside its target")
    ap.add_argument("command", choices=["install", "ship"],
                    help="install: a new MODEL_DIR with the target's files and the head; ship: "
                         "the head into the target directory itself (no MODEL_DIR)")
    ap.add_argument("head_dir")
    ap.add_argument("model_dir", nargs="?")
    ap.add_argument("--target", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "assets", "models", "flash-tiny"))
    ap.add_argument("--copy", action="store_true", help="copy the target's files (default: links)")
    a = ap.parse_args(argv)
    if a.command == "ship":
        if a.model_dir is not None:
            raise SystemExit("dspark_export ship: no MODEL_DIR (the head goes into --target)")
        ship(a.head_dir, a.target)
        print(f"shipped {a.head_dir} in {a.target}")
        return
    if a.model_dir is None:
        raise SystemExit("dspark_export install: give MODEL_DIR")
    if os.path.abspath(a.model_dir) == os.path.abspath(a.target):
        raise SystemExit("dspark_export install: MODEL_DIR must differ from the target directory")
    install(a.head_dir, a.target, a.model_dir, link=not a.copy)
    print(f"installed {a.head_dir} with {a.target} in {a.model_dir}")


if __name__ == "__main__":
    main()
