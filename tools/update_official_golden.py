#!/usr/bin/env python3
"""Puts a new official golden of flash-tiny (what tools/gpu/official_flash_tiny.sh brings back
from the GPU machine) into tests/data/goldens/official/, after checking that it is one:

    python3 tools/update_official_golden.py DIR [--model assets/models/flash-tiny] [--goldens DIR]

DIR holds flash-tiny-blocks.safetensors, flash-tiny-manifest.json and
flash-tiny-decode-defect.json. Refused, with nothing written, when the run used other official
files or another revision than the committed goldens, a torch without float8 (an emulated run
is a plumbing check, not a golden), another prompt length or decode length, or when its checkpoint
hashes are not those of the model directory here (the golden would be of other weights). Then
the blocks file replaces flash-tiny.safetensors and manifest.json's flash-tiny case takes the new
shard hashes, its decode-defect rows and the run's torch version. The case's order noise, measured
on the old golden, is dropped: run tools/official_order_noise.py next.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDENS = os.path.join(REPO, "tests", "data", "goldens", "official")
CASE = "flash-tiny"


class Refused(Exception):
    pass


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Refused(f"{path}: {e}") from e


def torch_has_float8(version):
    """The official code needs torch >= 2.9 for its float8/float4 dtypes."""
    try:
        major, minor = (int(p) for p in version.split("+")[0].split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (2, 9)


def check(run, defect, committed, model_dir):
    """The reasons the run is not a golden of model_dir (empty: it is one)."""
    problems = []
    if run.get("revision", "")[:8] != committed["official_revision"][:8]:
        problems.append(f"official revision {run.get('revision')} is not "
                        f"{committed['official_revision']}")
    ours = committed["official_files_sha256"]
    theirs = run.get("official_files_sha256", {})
    for name, digest in ours.items():
        if theirs.get(name) != digest:
            problems.append(f"official {name}: sha256 {theirs.get(name)} is not {digest}")
    if not torch_has_float8(str(run.get("torch", ""))):
        problems.append(f"torch {run.get('torch')} has no float8 dtypes (an emulated run?)")
    case = committed["cases"][CASE]
    for key in ("prompt_len", "decode_steps"):
        if run.get(key) != case[key]:
            problems.append(f"{key} {run.get(key)} is not {case[key]}")
    shards = sorted(n for n in os.listdir(model_dir)
                    if n.startswith("model-") and n.endswith(".safetensors")
                    and "dspark" not in n)
    if not shards:
        problems.append(f"no model shards in {model_dir}")
    for name in shards:
        here = sha256(os.path.join(model_dir, name))
        if run.get("checkpoint_sha256", {}).get(name) != here:
            problems.append(f"{name}: the run's sha256 {run.get('checkpoint_sha256', {}).get(name)}"
                            f" is not this model's {here}")
    if not isinstance(defect, list) or not all("layer" in row for row in defect):
        problems.append("the decode-defect file is not a list of per-layer rows")
    return problems, shards


def update(src, model_dir, goldens=GOLDENS):
    blocks = os.path.join(src, f"{CASE}-blocks.safetensors")
    if not os.path.isfile(blocks):
        raise Refused(f"{blocks}: missing")
    run = load_json(os.path.join(src, f"{CASE}-manifest.json"))
    defect = load_json(os.path.join(src, f"{CASE}-decode-defect.json"))
    manifest_path = os.path.join(goldens, "manifest.json")
    committed = load_json(manifest_path)
    problems, shards = check(run, defect, committed, model_dir)
    if problems:
        raise Refused("not a golden of this model:\n  " + "\n  ".join(problems))
    case = committed["cases"][CASE]
    case["sha256"] = {name: run["checkpoint_sha256"][name] for name in shards}
    # measured on the old golden: tools/official_order_noise.py measures the new one's
    case.pop("order_noise", None)
    committed["decode_defect"][CASE] = defect
    committed["made_by"] = ("tools/official_goldens.py (run on the GPU machine's CPU, torch "
                            f"{run['torch']}, {run.get('threads', '?')} threads)")
    # write the manifest through a temporary file so a failure leaves the old one whole
    tmp = manifest_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(committed, f, indent=1)  # the committed file's own layout
    shutil.copyfile(blocks, os.path.join(goldens, case["file"]))
    os.replace(tmp, manifest_path)
    return case


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", help="what official_flash_tiny.sh wrote under $OUT")
    p.add_argument("--model", default=os.path.join(REPO, "assets", "models", "flash-tiny"))
    p.add_argument("--goldens", default=GOLDENS, help="the folder of the official goldens")
    a = p.parse_args(argv)
    try:
        case = update(a.dir, a.model, a.goldens)
    except Refused as e:
        print(f"update_official_golden: {e}", file=sys.stderr)
        return 1
    print(f"updated {os.path.join(a.goldens, case['file'])} and manifest.json: "
          f"{', '.join(f'{k} {v[:12]}' for k, v in case['sha256'].items())}; now run "
          "tools/official_order_noise.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
