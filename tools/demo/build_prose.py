"""Builds data/prose.tsv.gz (committed) from freely licensed English text in Debian packages.

Sources (installed with apt-get; see data/LICENSES.md):
  fortunes, fortunes-min  /usr/share/games/fortunes/<file>  BSD-3-Clause (University of California)
  wordnet-base            /usr/share/wordnet/data.*          WordNet 3.0 licence (Princeton University)
The GPU machine cannot install packages, so the extracted text travels as a small committed file.
Run: /usr/bin/python3 tools/demo/build_prose.py  (deterministic: same packages -> same bytes)
"""

import gzip
import hashlib
import os
import re
import sys

FORTUNE_DIR = "/usr/share/games/fortunes"
FORTUNE_FILES = ("fortunes", "wisdom", "literature", "science", "food", "kids", "education", "people",
                 "computers", "pets", "work", "platitudes", "riddles", "sports")
# Passages with these words are left out: the demo model should not learn to say them.
BLOCKED = re.compile(r"\b(kill\w*|sex\w*|drunk\w*|damn\w*|hell|shit\w*|fuck\w*|naked|murder\w*|suicide|rape\w*|"
                     r"drugs?|beer|whisk(e)?y|guns?|shoot\w*|dead|die|death|god|bastard|bitch|stupid|idiot)\b", re.I)
WORDNET_DIR = "/usr/share/wordnet"
WORDNET_POS = (("noun", "noun"), ("verb", "verb"), ("adj", "adjective"), ("adv", "adverb"))
WORDNET_KEEP_PER_MILLE = 180  # keep ~18% of the synsets that have an example sentence
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "prose.tsv.gz")


def _clean(text):
    return re.sub(r"\s+", " ", text).strip()


def _looks_like_prose(text):
    if not 40 <= len(text) <= 600 or not text.isascii() or BLOCKED.search(text):
        return False
    letters = sum(c.isalpha() or c == " " for c in text)
    return letters / len(text) > 0.8


def fortunes():
    for name in FORTUNE_FILES:
        path = os.path.join(FORTUNE_DIR, name)
        with open(path, encoding="utf-8", errors="replace") as f:
            for entry in f.read().split("\n%\n"):
                text = _clean(entry)
                if _looks_like_prose(text):
                    yield "fortune", text


def _keep(offset):
    return int(hashlib.sha256(offset.encode()).hexdigest(), 16) % 1000 < WORDNET_KEEP_PER_MILLE


def wordnet():
    for suffix, pos_name in WORDNET_POS:
        with open(os.path.join(WORDNET_DIR, "data." + suffix), encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or "|" not in line:
                    continue  # licence header lines
                head, gloss = line.split("|", 1)
                fields = head.split()
                n_words = int(fields[3], 16)
                words = [fields[4 + 2 * k].replace("_", " ") for k in range(n_words)]
                parts = [p.strip() for p in gloss.split(";")]
                definition = "; ".join(p for p in parts if not p.startswith('"'))
                examples = [p.strip('" ') for p in parts if p.startswith('"')]
                if not examples or not _keep(fields[0]):
                    continue
                word = re.sub(r"\(.*\)$", "", words[0])
                example = examples[0] if examples[0][-1:] in ".?!" else examples[0] + "."
                text = f"{word} ({pos_name}): {definition}. Example: {example}"
                if len(words) > 1:
                    text += " Also: " + ", ".join(re.sub(r"\(.*\)$", "", w) for w in words[1:4]) + "."
                if text.isascii():
                    yield "wordnet", _clean(text)


def main():
    rows = list(fortunes()) + list(wordnet())
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    body = "".join(f"{src}\t{text}\n" for src, text in rows).encode("utf-8")
    with open(OUT, "wb") as raw:
        # mtime=0 and no file name keep the gzip bytes identical from run to run.
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
            gz.write(body)
    counts = {}
    for src, _ in rows:
        counts[src] = counts.get(src, 0) + 1
    print(f"wrote {OUT}: {len(rows)} passages {counts}, {len(body)} bytes raw, {os.path.getsize(OUT)} gz",
          file=sys.stderr)


if __name__ == "__main__":
    main()
