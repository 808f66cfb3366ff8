"""Byte-level BPE tokenizer read from an HF tokenizer.json (the subset DeepSeek's files use).

Encoding: added tokens are matched in the raw text first (longest spelling wins), the rest goes
through the DeepSeek-V3 pre-tokenizer and BPE merges by rank. Decoding maps byte symbols back to
bytes and UTF-8-decodes (invalid sequences become U+FFFD, as HF's ByteLevel decoder does).
"""

import json

from demo import pretokenizer


class TokenizerFormatError(ValueError):
    """tokenizer.json content this reader does not support; the message names the file and field."""


class Tokenizer:
    def __init__(self, vocab, merges, added_tokens, source="<memory>"):
        self.vocab = dict(vocab)  # byte-symbol string -> id
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}  # (left, right) -> rank
        self.added = dict(added_tokens)  # spelling -> id
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.id_to_token.update({i: t for t, i in self.added.items()})
        self.added_ids = frozenset(self.added.values())
        # Longest spellings first so that a spelling that prefixes another cannot shadow it.
        self._added_by_length = sorted(self.added, key=len, reverse=True)
        self._first_chars = frozenset(s[0] for s in self.added)
        self._cache = {}
        self.source = source

    @classmethod
    def from_file(cls, path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return cls.from_json(data, source=str(path))

    @classmethod
    def from_json(cls, data, source="<memory>"):
        model = data.get("model") or {}
        if model.get("type") != "BPE":
            raise TokenizerFormatError(f"{source}: model.type must be BPE, got {model.get('type')!r}")
        merges = []
        for k, m in enumerate(model.get("merges", [])):
            pair = tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
            if len(pair) != 2:
                raise TokenizerFormatError(f"{source}: model.merges[{k}] is not a pair: {m!r}")
            merges.append(pair)
        added = {a["content"]: a["id"] for a in data.get("added_tokens", [])}
        return cls(model["vocab"], merges, added, source)

    @property
    def vocab_size(self):
        return max(self.id_to_token) + 1

    def token_id(self, spelling):
        if spelling in self.added:
            return self.added[spelling]
        return self.vocab[spelling]

    def _bpe(self, word):
        """Ids of one byte-level word, merging the lowest-ranked adjacent pair until none is left."""
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        parts = list(word)
        ranks = self.ranks
        while len(parts) > 1:
            best, best_rank = -1, None
            for k in range(len(parts) - 1):
                r = ranks.get((parts[k], parts[k + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = k, r
            if best < 0:
                break
            merged = parts[best] + parts[best + 1]
            # Merge every occurrence of this pair left to right, as HF's BPE does.
            out, k = [], 0
            left, right = parts[best], parts[best + 1]
            while k < len(parts):
                if k + 1 < len(parts) and parts[k] == left and parts[k + 1] == right:
                    out.append(merged)
                    k += 2
                else:
                    out.append(parts[k])
                    k += 1
            parts = out
        ids = [self.vocab[p] for p in parts]
        if len(self._cache) < 500_000:
            self._cache[word] = ids
        return ids

    def encode_plain(self, text):
        """Ids of text that contains no added-token spellings (no special-token matching)."""
        ids = []
        for word in pretokenizer.pre_tokenize(text):
            ids.extend(self._bpe(word))
        return ids

    def _split_added(self, text):
        """(segment, is_added) pairs: added-token spellings cut out of the text, leftmost first."""
        out, start, i, n = [], 0, 0, len(text)
        while i < n:
            if text[i] in self._first_chars:
                hit = next((s for s in self._added_by_length if text.startswith(s, i)), None)
                if hit is not None:
                    if start < i:
                        out.append((text[start:i], False))
                    out.append((hit, True))
                    i += len(hit)
                    start = i
                    continue
            i += 1
        if start < n:
            out.append((text[start:], False))
        return out

    def encode(self, text):
        ids = []
        for segment, is_added in self._split_added(text):
            if is_added:
                ids.append(self.added[segment])
            else:
                ids.extend(self.encode_plain(segment))
        return ids

    def decode_bytes(self, ids):
        out = bytearray()
        for i in ids:
            tok = self.id_to_token[i]
            if i in self.added_ids:
                out += tok.encode("utf-8")
            else:
                out += bytes(pretokenizer.CHAR_TO_BYTE[c] for c in tok)
        return bytes(out)

    def decode(self, ids):
        return self.decode_bytes(ids).decode("utf-8", errors="replace")
