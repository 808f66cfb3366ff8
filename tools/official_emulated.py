#!/usr/bin/env python3
"""Runs a script that uses the official V4.1 code (official_goldens.py, official_dspark_goldens.py)
on a torch without the float8/float4 dtypes (Debian's 1.13 here), for plumbing checks only.

    /usr/bin/python3 tools/official_emulated.py tools/official_dspark_goldens.py \
        --official .official/inference --model CKPT --out-dir OUT

The official files run unchanged. torch.float8_e4m3fn, float8_e8m0fnu and float4_e2m1fn_x2 stand
in as float16, float64 and complex64 (real = the even element, imag = the odd one), which hold the
same values exactly; the official CPU kernel module's two dtype casts (`_to_e4m3_satfinite`,
`unpack_fp4`) are replaced by exact emulations (tools/flashdesk_ref's E4M3 rounding), and
official_goldens.load_weights by a loader that decodes the checkpoint's FP8/E8M0/FP4 bytes into
those stand-ins. `tokenizers` and `PIL`, when missing, are stubbed: the Engram token map then comes
from the stub tokenizer official_goldens builds for random checkpoints (no tokenizer.json), and no
image can be read. The results should equal the official code's up to the emulated casts, but
goldens are made on the GPU machine's torch (docs/goldens.md); this is how the harness was tested
here.
"""
import importlib
import os
import runpy
import sys
import types

import torch

TOOLS = os.path.dirname(os.path.abspath(__file__))
STAND_INS = {"float8_e4m3fn": torch.float16, "float8_e8m0fnu": torch.float64,
             "float4_e2m1fn_x2": torch.complex64}


def stub_missing_modules():
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        class Identity:
            def normalize_str(self, s):
                return s

        class Normalizers:
            Sequence = staticmethod(lambda steps: Identity())
            NFKC = NFD = StripAccents = Lowercase = Strip = Replace = staticmethod(
                lambda *a: None)

        tk = types.ModuleType("tokenizers")
        tk.Regex, tk.normalizers = (lambda s: s), Normalizers
        sys.modules["tokenizers"] = tk
    try:
        import PIL  # noqa: F401
    except ImportError:
        pil = types.ModuleType("PIL")
        pil.Image = pil.ImageOps = None
        sys.modules["PIL"] = pil


def emulate(official):
    """Installs the stand-ins for the official copy in folder `official`."""
    sys.path.insert(0, TOOLS)
    from flashdesk_ref import formats, quant
    import official_goldens as og

    folder = os.path.abspath(official)
    sys.path.insert(0, os.path.dirname(folder))
    kernels = importlib.import_module(os.path.basename(folder) + ".kernel_cpu")
    kernels._to_e4m3_satfinite = lambda x: quant.e4m3(x.float().clamp(-448, 448)).half()
    kernels.unpack_fp4 = lambda b: torch.stack([b.real, b.imag], dim=-1).flatten(-2)
    e4m3 = torch.from_numpy(formats.E4M3_TABLE.copy())
    e2m1 = torch.from_numpy(formats.E2M1_TABLE.copy())

    def e8m0(codes):
        return torch.pow(torch.tensor(2.0, dtype=torch.float64), codes.long().double() - 127)

    def load_weights(model, tensors):
        used = set()
        for name, p in model.named_parameters():
            if name not in tensors:
                raise SystemExit(f"official_emulated: the checkpoint has no tensor {name}")
            kind, t = tensors[name]
            used.add(name)
            if p.dtype == torch.float16:
                value = e4m3[t.long()].half()
            elif p.dtype == torch.float64:
                value = e8m0(t)
            elif p.dtype == torch.complex64:
                b = t.view(torch.uint8).long()
                value = torch.complex(e2m1[b & 15], e2m1[b >> 4])
            elif kind == "F8_E4M3":  # wo_a: dequantised to BF16 as the official convert.py does
                scale = name[:-len("weight")] + "scale"
                w, s = e4m3[t.long()], e8m0(tensors[scale][1]).float()
                s = s.repeat_interleave(32, 0)[:w.shape[0]].repeat_interleave(32, 1)[:, :w.shape[1]]
                value = (w * s).to(p.dtype)
                used.add(scale)
            else:
                value = t.to(p.dtype)
            if tuple(value.shape) != tuple(p.shape):
                raise SystemExit(f"official_emulated: {name} is {tuple(value.shape)}, the official "
                                 f"model wants {tuple(p.shape)}")
            p.data = value
        return sorted(set(tensors) - used)

    og.load_weights = load_weights


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    script, args = os.path.abspath(sys.argv[1]), sys.argv[2:]
    if hasattr(torch, "float8_e8m0fnu"):
        raise SystemExit("official_emulated: this torch has the float8 dtypes: run the script "
                         "itself")
    for name, dtype in STAND_INS.items():
        setattr(torch, name, dtype)
    stub_missing_modules()
    if "--official" in args and "--check-source" not in args:
        emulate(args[args.index("--official") + 1])
    sys.argv = [script] + args
    sys.path.insert(0, os.path.dirname(script))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
