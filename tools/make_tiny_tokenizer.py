#!/usr/bin/python3
"""Writes tests/data/tokenizers/tiny/tokenizer.json: a small byte-level BPE tokenizer in exactly
DeepSeek's tokenizer.json layout (same pre-tokenizer, decoder, special-token spellings) but with
other ids, so tests prove that ids are looked up by spelling. Merges are learnt here by plain
BPE over the GPL-3 text (deterministic); the result only needs to be a valid tokenizer.

Usage: /usr/bin/python3 tools/make_tiny_tokenizer.py OUT.json [N_MERGES]
"""
import collections
import json
import re
import sys

DEEPSEEK_PRE_TOKENIZER = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"},
         "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|"
                                      "[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|"
                                      "\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ],
}

# Added tokens in an order (and so with ids) unlike DeepSeek's: BOS is not 0.
SPECIALS = [
    ("<think>", True), ("</think>", True), ("<｜User｜>", False), ("<｜Assistant｜>", False),
    ("<｜System｜>", True), ("<｜begin▁of▁sentence｜>", True), ("<｜end▁of▁sentence｜>", True),
    ("<｜▁pad▁｜>", True), ("<｜deepseek_image｜>", True),
]


def bytes_to_unicode():
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    mapping, extra = {}, 0
    for b in range(256):
        if b in keep:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def train(text, n_merges, b2u):
    words = collections.Counter(re.findall(r" ?[A-Za-z]+| ?[0-9]| ?[^\sA-Za-z0-9]+|\s+", text))
    corpus = {tuple(b2u[b] for b in w.encode()): c for w, c in words.items()}
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for word, count in corpus.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        new_corpus = {}
        for word, count in corpus.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_corpus[tuple(out)] = new_corpus.get(tuple(out), 0) + count
        corpus = new_corpus
    return merges


def main():
    out_path = sys.argv[1]
    n_merges = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = train(open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read(), n_merges, b2u)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = [{"id": len(vocab) + i, "content": c, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": not special, "special": special}
             for i, (c, special) in enumerate(SPECIALS)]
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": DEEPSEEK_PRE_TOKENIZER,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(vocab)} vocab tokens, {len(merges)} merges, {len(added)} added tokens")


if __name__ == "__main__":
    main()
