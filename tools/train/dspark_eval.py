#!/usr/bin/env python3
"""Mean accepted tokens per verify of a DSpark head on demo prompts, measured with the engine
(`flashdesk-cli generate --speculative dspark --json`).

    python3 tools/train/dspark_eval.py --head OUT/head [--set dev|test] [--n 24] \
        [--cli build/release/bin/flashdesk-cli] [--check 4] [--compare-off] \
        [--backend cpu] [--draft-min-survival X] [--temperature T --top-p P --seed S]

--head is a head export (dspark_train.py's OUT/head, three files) installed beside --target
(default assets/models/flash-tiny) in a temporary directory; --model takes an installed model
directory instead. Prompts: the last user message of demo task samples (tools/demo generators),
each in its sample's mode (thinking at its effort, or chat), seeds from the `dev` stream
(development: look at it freely) or the `test` stream (sealed: report it once, do not tune on
it). Both streams are disjoint from the trainer's seeds (dspark_train.py streams 11-13).

Prints one line per prompt and the totals: verifies, drafted, accepted drafts, accepted drafts
per verify (the engine's mean_accepted_per_verify) and tokens per verify (accepted + the
target's own token).

--check K: for the first K chat-mode prompts, replays the engine's greedy speculative loop with
the trainer's head (dspark_head.py, loaded from the same files, target features from the
trainer's forward of the engine's own output) and compares verifies and accepted drafts with
the engine's: equal counts mean the engine and the trainer drafted the same ids at every verify
(up to the rare flip of a near tie by the two forwards' rounding).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from train.data import sample_seed  # noqa: E402
from train.dspark_export import install, load_head  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = ("conversation", "prose", "arithmetic", "copy", "followup", "recall")
STREAMS = {"dev": 21, "test": 22}


def prompts(which, n, seed=0):
    """[(task, text, mode, effort)] from the demo generators."""
    from demo import arithmetic, conversation, copy_task, followup, prose, recall
    gens = dict(conversation=conversation.generate, prose=prose.generate,
                arithmetic=arithmetic.generate, copy=copy_task.generate,
                followup=followup.generate, recall=recall.generate)
    out = []
    for j in range(n):
        task = TASKS[j % len(TASKS)]
        ex = gens[task](sample_seed(seed, STREAMS[which], TASKS.index(task), j))
        users = [m for m in ex.messages if m["role"] == "user"]
        content = users[-1]["content"]
        if not isinstance(content, str):
            content = "\n\n".join(p["text"] for p in content if p["type"] == "text")
        out.append((task, content, ex.mode, ex.effort))
    return out


def run_cli(cli, model, text, mode, effort, max_tokens, speculative="dspark", extra=()):
    cmd = [cli, "generate", "--model", model, "--prompt", text, "--json", "--speculative",
           speculative, "--max-tokens", str(max_tokens),
           "--thinking", "on" if mode == "thinking" else "off", *extra]
    if mode == "thinking" and effort is not None:
        cmd += ["--effort", str(effort)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}...: exit {r.returncode}: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def decode_seconds(stats):
    """The engine's decode time (after the first token), from its tokens/s over tokens - 1."""
    n = stats["generated_tokens"] - 1
    tps = stats["decode_tokens_per_s"]
    return n / tps if n > 0 and tps > 0 else 0.0


def answer_ids(out):
    return list(out["reasoning_ids"]) + list(out["answer_ids"])


def simulate(model_dir, text, out, max_tokens):
    """(verifies, accepted) of the engine's loop replayed with the trainer's head."""
    from demo import chat_format, make_dataset
    from train.dspark_head import DsparkConfig, DsparkHead
    from train.dspark_target import Target, _sample
    from train.numerics import Numerics
    tok = make_dataset.load_tokenizer(os.path.join(model_dir, "tokenizer.json"))
    segs = chat_format.render_segments([{"role": "user", "content": text}], "chat",
                                       add_generation_prompt=True)
    prompt, _, _ = chat_format.tokenize_segments(segs, tok)
    if len(prompt) != out["stats"]["prompt_tokens"]:
        raise RuntimeError(f"prompt rendering differs from the engine's: {len(prompt)} tokens "
                           f"vs {out['stats']['prompt_tokens']}")
    with open(os.path.join(model_dir, "config.json")) as f:
        dcfg = DsparkConfig.from_text_config(json.load(f)["text_config"])
    num = Numerics(emulate_fp32=True)
    target = Target(model_dir, num, torch.device("cpu"), dcfg.target_layers)
    head = DsparkHead(target.cfg, dcfg)
    load_head(head, model_dir)
    head.eval()
    eos = int(target.cfg.raw.get("eos_token_id", 1))
    answer = list(out["answer_ids"]) + ([eos] if out["finish"] == "eos" else [])
    full = list(prompt) + answer
    ids, feats, _ = target.run([_sample(full, len(prompt))])
    ids, feats = ids[0], feats[0]
    end = len(full)                                    # tokens taken: full[len(prompt):end]
    P, taken, verifies, accepted = len(prompt), 1, 0, 0
    while P < end - 1:
        k = max(0, min(dcfg.block_size, max_tokens - taken - 1))
        if k == 0:
            break
        drafts, _, _ = head.greedy(num, target.embed, target.head, feats, ids, P)
        a = 0
        while a < k and P + 1 + a < end and drafts[a] == full[P + 1 + a]:
            a += 1
        verifies += 1
        accepted += a
        taken += a + 1
        P += a + 1
    return verifies, accepted


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--head", help="a head export directory (three files)")
    ap.add_argument("--target", default=os.path.join(REPO, "assets/models/flash-tiny"))
    ap.add_argument("--model", help="an installed model directory (instead of --head)")
    ap.add_argument("--cli", default=os.path.join(REPO, "build/release/bin/flashdesk-cli"))
    ap.add_argument("--set", choices=sorted(STREAMS), default="dev")
    ap.add_argument("--n", type=int, default=24)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--check", type=int, default=0)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--threads", type=int, help="CPU threads (the CLI's default: every core)")
    ap.add_argument("--draft-min-survival", type=float,
                    help="the confidence threshold (the CLI's default when not given)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compare-off", action="store_true",
                    help="also decode without speculation: speed-up, and identical ids (greedy)")
    a = ap.parse_args(argv)
    greedy = a.temperature == 0.0
    if a.check and not greedy:
        raise SystemExit("--check replays the greedy loop: use it with temperature 0")
    extra = ["--backend", a.backend, "--temperature", str(a.temperature), "--top-p", str(a.top_p),
             "--seed", str(a.seed)]
    if a.threads is not None:
        extra += ["--threads", str(a.threads)]
    spec_extra = list(extra)
    if a.draft_min_survival is not None:
        spec_extra += ["--draft-min-survival", str(a.draft_min_survival)]
    if not os.path.exists(a.cli):
        raise SystemExit(f"{a.cli}: no such CLI (build flashdesk-cli or pass --cli)")
    tmp = tempfile.TemporaryDirectory()
    model = a.model
    if model is None:
        if not a.head:
            raise SystemExit("give --head or --model")
        model = os.path.join(tmp.name, "model")
        install(a.head, a.target, model, link=True)
    tot = dict(verifies=0, drafted=0, accepted=0, tokens=0, rounds=0, decoded=0, seconds=0.0,
               off_decoded=0, off_seconds=0.0, draft_ms=0.0, verify_ms=0.0, keep_ms=0.0)
    checks, checked, differ = [], 0, []
    for i, (task, text, mode, effort) in enumerate(prompts(a.set, a.n)):
        out = run_cli(a.cli, model, text, mode, effort, a.max_tokens, "dspark", spec_extra)
        s = out["stats"]
        tot["verifies"] += s["verifies"]
        tot["drafted"] += s["drafted_tokens"]
        tot["accepted"] += s["accepted_tokens"]
        tot["tokens"] += s["generated_tokens"]
        tot["rounds"] += s["draft_rounds"]
        tot["decoded"] += max(0, s["generated_tokens"] - 1)
        tot["seconds"] += decode_seconds(s)
        for phase in ("draft_ms", "verify_ms", "keep_ms"):
            tot[phase] += s.get(phase, 0.0)
        line = (f"{i:3d} {task:12s} {mode:8s} tokens {s['generated_tokens']:4d} verifies "
                f"{s['verifies']:3d} accepted {s['accepted_tokens']:4d} "
                f"({s['mean_accepted_per_verify']:.2f}/verify) "
                f"{s['decode_tokens_per_s']:.0f} tok/s")
        if a.compare_off:
            off = run_cli(a.cli, model, text, mode, effort, a.max_tokens, "off", extra)
            o = off["stats"]
            tot["off_decoded"] += max(0, o["generated_tokens"] - 1)
            tot["off_seconds"] += decode_seconds(o)
            line += f", off {o['decode_tokens_per_s']:.0f} tok/s"
            if greedy:
                same = answer_ids(off) == answer_ids(out) and off["finish"] == out["finish"]
                line += "" if same else "  IDS DIFFER from plain decoding"
                if not same:
                    differ.append(i)
        if checked < a.check and mode == "chat":
            v, acc = simulate(model, text, out, a.max_tokens)
            checks.append((v, acc) == (s["verifies"], s["accepted_tokens"]))
            line += f"  trainer replay: verifies {v} accepted {acc} {'same' if checks[-1] else 'DIFFERENT'}"
            checked += 1
        print(line, flush=True)
    v = max(1, tot["verifies"])
    print(f"{a.set} set, {a.n} prompts: {tot['tokens']} tokens, {tot['verifies']} verifies, "
          f"{tot['drafted']} drafted, {tot['accepted']} accepted: "
          f"{tot['accepted'] / v:.3f} accepted drafts per verify, "
          f"{(tot['accepted'] + tot['verifies']) / v:.3f} tokens per verify, "
          f"{tot['drafted'] / max(1, tot['rounds']):.3f} drafts per round "
          f"({tot['rounds']} rounds)")
    spec_speed = tot["decoded"] / tot["seconds"] if tot["seconds"] > 0 else 0.0
    print(f"decode speed, speculative: {spec_speed:.1f} tokens/s "
          f"({tot['decoded']} tokens in {tot['seconds']:.2f} s)")
    rounds = max(1, tot["rounds"])
    print(f"per round (host ms): draft {tot['draft_ms'] / rounds:.3f}, verify "
          f"{tot['verify_ms'] / rounds:.3f}, keep {tot['keep_ms'] / rounds:.3f}")
    if a.compare_off:
        off_speed = tot["off_decoded"] / tot["off_seconds"] if tot["off_seconds"] > 0 else 0.0
        print(f"decode speed, off: {off_speed:.1f} tokens/s ({tot['off_decoded']} tokens in "
              f"{tot['off_seconds']:.2f} s); speed-up {spec_speed / max(off_speed, 1e-9):.2f}x")
        if greedy:
            print(f"ids identical to plain decoding: {a.n - len(differ)} of {a.n} prompts"
                  + (f" (differ: {differ})" if differ else ""))
    if checks:
        print(f"trainer replay: {sum(checks)} of {len(checks)} prompts with the engine's exact "
              "verify and acceptance counts")
    tmp.cleanup()
    return 0 if all(checks) and not differ else 1


if __name__ == "__main__":
    sys.exit(main())
