"""DeepSeek-V3 pre-tokenizer (three Split regexes, then ByteLevel) in pure Python.

Python's `re` lacks \\p{..} classes and Debian's python3-regex is absent on the GPU machine, so the
three patterns of DeepSeek-V3's tokenizer.json are implemented by hand with unicodedata, with the
same leftmost-first alternation and backtracking results as the regex engine:
  1. \\p{N}{1,3}                                  (Isolated)
  2. [一-龥぀-ゟ゠-ヿ]+                             (Isolated)
  3. [!-/:-@[-`{-~][A-Za-z]+ | [^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+ | ?[\\p{P}\\p{S}]+[\\r\\n]*
     | \\s*[\\r\\n]+ | \\s+(?!\\S) | \\s+          (Isolated)
  4. ByteLevel (GPT-2 byte-to-unicode map, no prefix space, no regex).
"""

import unicodedata

# Unicode White_Space (what the regex engine's \s matches in Unicode mode).
_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_ASCII_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_CRLF = frozenset("\r\n")


def _major(ch):
    """First letter of the general category: L, M, N, P, S, Z, C."""
    return unicodedata.category(ch)[0]


def is_number_char(ch):
    return _major(ch) == "N"


def _is_cjk(ch):
    o = ord(ch)
    return 0x4E00 <= o <= 0x9FA5 or 0x3040 <= o <= 0x309F or 0x30A0 <= o <= 0x30FF


def _split_isolated_runs(text, is_member, max_run):
    """Pieces for a Split(Isolated) whose pattern is `member{1,max_run}` (max_run None = `+`)."""
    pieces, start, i, n = [], 0, 0, len(text)
    while i < n:
        if not is_member(text[i]):
            i += 1
            continue
        j = i
        while j < n and is_member(text[j]) and (max_run is None or j - i < max_run):
            j += 1
        if start < i:
            pieces.append(text[start:i])
        pieces.append(text[i:j])
        start = i = j
    if start < n:
        pieces.append(text[start:])
    return pieces


def _ws_end(s, i):
    n = len(s)
    while i < n and s[i] in _WHITESPACE:
        i += 1
    return i


def _match_letters_after_punct(s, i):
    """[!-/:-@[-`{-~][A-Za-z]+"""
    if s[i] in _ASCII_PUNCT and i + 1 < len(s) and s[i + 1] in _ASCII_LETTERS:
        j = i + 2
        while j < len(s) and s[j] in _ASCII_LETTERS:
            j += 1
        return j
    return -1


def _letters_end(s, j):
    while j < len(s) and _major(s[j]) in "LM":
        j += 1
    return j


def _match_word(s, i):
    """[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+ (the optional char is tried first)."""
    c = s[i]
    if c not in _CRLF and _major(c) not in "LPS":
        if i + 1 < len(s) and _major(s[i + 1]) in "LM":
            return _letters_end(s, i + 1)
    if _major(c) in "LM":
        return _letters_end(s, i)
    return -1


def _match_punct(s, i):
    """ ?[\\p{P}\\p{S}]+[\\r\\n]*"""
    j = i
    if s[j] == " " and j + 1 < len(s) and _major(s[j + 1]) in "PS":
        j += 1
    if _major(s[j]) not in "PS":
        return -1
    while j < len(s) and _major(s[j]) in "PS":
        j += 1
    while j < len(s) and s[j] in _CRLF:
        j += 1
    return j


def _match_newlines(s, i):
    """\\s*[\\r\\n]+ : ends just after the last CR/LF of the whitespace run."""
    end = _ws_end(s, i)
    for p in range(end - 1, i - 1, -1):
        if s[p] in _CRLF:
            return p + 1
    return -1


def _match_spaces(s, i):
    """\\s+(?!\\S) then \\s+ : a run not followed by text, else all but its last char."""
    end = _ws_end(s, i)
    if end == i:
        return -1
    if end == len(s) or end - 1 == i:
        return end
    return end - 1


_ALTERNATIVES = (_match_letters_after_punct, _match_word, _match_punct, _match_newlines, _match_spaces)


def _split_words(s):
    """Split 3 (Isolated): matches and the unmatched gaps between them are both pieces."""
    pieces, gap_start, i, n = [], 0, 0, len(s)
    while i < n:
        end = -1
        for alt in _ALTERNATIVES:
            end = alt(s, i)
            if end > i:
                break
        if end <= i:
            i += 1
            continue
        if gap_start < i:
            pieces.append(s[gap_start:i])
        pieces.append(s[i:end])
        gap_start = i = end
    if gap_start < n:
        pieces.append(s[gap_start:])
    return pieces


def pre_split(text):
    """Text pieces after the three DeepSeek-V3 Split steps (before the byte-level mapping)."""
    out = []
    for p1 in _split_isolated_runs(text, is_number_char, 3):
        for p2 in _split_isolated_runs(p1, _is_cjk, None):
            out.extend(_split_words(p2))
    return out


def _bytes_to_unicode():
    """GPT-2's byte -> printable character map used by the ByteLevel pre-tokenizer/decoder."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


BYTE_TO_CHAR = _bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}
# The 256 byte symbols in the order DeepSeek's vocabulary lists them (printable ASCII first).
BYTE_SYMBOLS = list(BYTE_TO_CHAR.values())


def byte_level(piece):
    return "".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8"))


def pre_tokenize(text):
    """Byte-level words (strings of byte symbols) that BPE then merges independently."""
    return [byte_level(p) for p in pre_split(text)]
