"""The frozen target for DSpark training: flash-tiny in the trainer's model, its target features
(docs/dspark.md "Target features": the mean over the hc streams of the input of each
dspark_target_layer_ids layer, bf16) and its greedy next token at every position, and greedy
generation by repeated full forwards (no KV cache: the trainer's model is a training forward)."""
import os
import time

import numpy as np
import torch

from .batch import Sample, collate
from .config import load_model_config
from .engram_map import load_hasher
from .export import import_model
from .model import Transformer
from .objective import Phase, make_context

F32 = torch.float32


class Target:
    def __init__(self, model_dir, num, device, target_layers):
        self.cfg = cfg = load_model_config(model_dir)
        self.num, self.device = num, device
        self.model = Transformer(cfg).eval()
        import_model(self.model, model_dir)
        self.model.to(device)
        for p in self.model.parameters():
            p.requires_grad_(False)
        path = os.path.join(model_dir, "engram_map.safetensors")
        self.hasher = load_hasher(cfg, path if os.path.exists(path) else None)
        if self.hasher is not None:
            self.hasher.to(device)
        self.targets = [int(l) for l in target_layers]
        for l in self.targets:
            if l in cfg.engram_layer_ids:
                raise ValueError(f"target layer {l} has Engram: its feature is after the Engram "
                                 "update, which the hook here does not see")
            if not 0 <= l < cfg.num_hidden_layers:
                raise ValueError(f"target layer {l} is not a layer of {cfg.name}")
        self._rows = {}
        for blk in self.model.layers:
            if blk.role.layer in self.targets:
                blk.register_forward_pre_hook(self._hook(blk.role.layer))
        self.phase = Phase(dense=False, distill=False)

    def _hook(self, layer):
        def hook(module, args):
            X = args[1]                                    # [B, N, hc, dim]
            self._rows[layer] = self.num.rb(X.to(F32).mean(-2))
        return hook

    @property
    def embed(self):
        return self.model.embed.weight

    @property
    def head(self):
        return self.model.head.weight

    @torch.no_grad()
    def run(self, samples, want_features=True):
        """(batch ids [S, N], features [S, N, targets*dim] or None, greedy [S, N]: the argmax of
        the logits at every position = the target's pick for the next token)."""
        W = self.cfg.sliding_window
        batch = collate(samples, W, W, [False] * len(samples),
                        pad_id=self.cfg.pad_token_id).to(self.device)
        ctx = make_context(self.model, batch, self.phase, self.hasher)
        self._rows = {}
        h = self.model(self.num, batch, ctx)
        S, N, dim = h.shape
        greedy = torch.empty(S, N, dtype=torch.long, device=self.device)
        flat = h.reshape(S * N, dim)
        for s in range(0, S * N, 8192):
            greedy.view(-1)[s:s + 8192] = self.model.logits(self.num, flat[s:s + 8192]).argmax(-1)
        feats = torch.cat([self._rows[l] for l in self.targets], -1) if want_features else None
        self._rows = {}
        return batch.ids, feats, greedy

    @torch.no_grad()
    def generate(self, prompts, max_new, eos, deadline=None):
        """Greedy continuations of prompt id arrays (until EOS, max_new tokens or the deadline):
        Samples whose target mask marks the generated tokens (answer_start = the prompt length)."""
        seqs = [list(map(int, p)) for p in prompts]
        done = [False] * len(seqs)
        for _ in range(max_new):
            if deadline is not None and time.time() > deadline:
                break
            live = [i for i, d in enumerate(done) if not d]
            if not live:
                break
            samples = [_sample(seqs[i], len(seqs[i])) for i in live]
            _, _, greedy = self.run(samples, want_features=False)
            for row, i in enumerate(live):
                tok = int(greedy[row, len(seqs[i]) - 1])
                seqs[i].append(tok)
                if tok == eos:
                    done[i] = True
        return [_sample(s, len(p), generated=True) for s, p in zip(seqs, prompts)]


def _sample(ids, prompt_len, generated=False):
    ids = np.asarray(ids, np.int64)
    target = np.zeros(len(ids), bool)
    if generated:
        target[prompt_len:] = True
    return Sample("generated" if generated else "prompt", ids, target, prompt_len)
