"""Engram's compressed-token map from an HF tokenizer.json, without the tokenizers library
(docs/model-spec.md §7 step 1; mirrors what the reference's Rust tokenizer + normalizer compute).

For every id in 0..len(tokenizer)-1 (model vocabulary + added tokens):
- text = the id decoded alone, no cleanup: added tokens verbatim; model tokens through the
  ByteLevel decoder (each char mapped back to its byte when every char of the token is in the
  byte map, else the token's own UTF-8 bytes), bytes decoded as UTF-8 with U+FFFD for invalid
  sequences; an id with no token decodes to "".
- text containing U+FFFD: key = the raw token string. Otherwise key = normalise(text), or the
  text itself when that is empty. normalise = NFKC, NFD, drop combining marks (General_Category
  M*, as the tokenizers crate's StripAccents), per-character lowercase, [ \\t\\r\\n]+ -> " ",
  a string that is exactly " " is protected by a sentinel, strip Unicode White_Space, sentinel
  back to " ".
- distinct keys get consecutive ids in token-id order.
"""
import json
import re
import unicodedata

SENTINEL = "\ue000"
# Rust char::is_whitespace (Unicode White_Space), which the Strip normalizer uses
RUST_WHITESPACE = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                   "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_SPACES = re.compile(r"[ \t\r\n]+")


def byte_level_chars():
    """The GPT-2 byte-level alphabet: char -> byte."""
    direct = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in direct:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


BYTE_OF = byte_level_chars()


def decode_byte_level(token):
    if all(c in BYTE_OF for c in token):
        raw = bytes(BYTE_OF[c] for c in token)
    else:
        raw = token.encode("utf-8")
    return raw.decode("utf-8", errors="replace")


def normalise(text):
    s = unicodedata.normalize("NFKC", text)
    s = unicodedata.normalize("NFD", s)
    s = "".join(c for c in s if not unicodedata.category(c).startswith("M"))
    s = "".join(c.lower() for c in s)
    s = _SPACES.sub(" ", s)
    if s == " ":
        s = SENTINEL
    s = s.strip(RUST_WHITESPACE)
    return s.replace(SENTINEL, " ")


class TokenizerJson:
    """The parts of tokenizer.json the map needs: id -> token string, added ids, decoder."""

    def __init__(self, path):
        try:
            with open(path, "r", encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: cannot read tokenizer: {e}") from None
        model = data.get("model") or {}
        vocab = model.get("vocab")
        if not isinstance(vocab, dict):
            raise ValueError(f"{path}: model.vocab is not a token -> id object (a BPE tokenizer is needed)")
        self.tokens = {int(i): t for t, i in vocab.items()}
        self.added = set()
        for entry in data.get("added_tokens") or []:
            if not isinstance(entry, dict) or "id" not in entry or "content" not in entry:
                raise ValueError(f"{path}: added_tokens entry without id/content: {entry!r}")
            self.tokens[int(entry["id"])] = entry["content"]
            self.added.add(int(entry["id"]))
        self.size = len(set(self.tokens.values()))  # len(tokenizer): distinct tokens
        _check_decoder(path, data.get("decoder"))

    def decode_one(self, token_id):
        token = self.tokens.get(token_id)
        if token is None:
            return ""
        return token if token_id in self.added else decode_byte_level(token)


def _check_decoder(path, decoder):
    kinds = []
    if isinstance(decoder, dict):
        kinds = [d.get("type") for d in decoder.get("decoders", [])] if decoder.get("type") == "Sequence" \
            else [decoder.get("type")]
    if kinds != ["ByteLevel"]:
        raise ValueError(f"{path}: decoder {kinds or decoder!r} is not supported (a ByteLevel decoder is needed)")


def compressed_token_map(tokenizer):
    """(list of compressed ids for ids 0..len(tokenizer)-1, number of distinct keys)."""
    keys, out = {}, []
    for token_id in range(tokenizer.size):
        text = tokenizer.decode_one(token_id)
        if "\ufffd" in text:
            key = tokenizer.tokens.get(token_id, "")
        else:
            key = normalise(text) or text
        out.append(keys.setdefault(key, len(keys)))
    return out, len(keys)
