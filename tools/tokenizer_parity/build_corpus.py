#!/usr/bin/python3
"""Builds the tokenizer parity corpus: tests/data/tokenizers/corpus/*.txt (UTF-8 documents).

English from Debian packages (fortunes-min, wordnet-base, the GPL-3 text), Chinese and
Japanese from Debian's GPL message catalogs (coreutils, grep, sed, bash), code from this
repository, and generated documents: emoji (ZWJ sequences, flags, keycaps, skin tones),
numbers, whitespace runs and mixed newlines, special-token spellings inside text, odd Unicode
(combining marks, scripts with viramas, unassigned and private-use code points) and seeded
random mixtures of the characters the pre-tokenizer patterns distinguish.

Every code point of the corpus must have the same tokenizer classes in our tables (Python's
Unicode) and in the peer's (V8's): pass the dump written by unicode_classes.js. Code points
that differ (assigned after Python's Unicode version; U+0085 and U+FEFF, whose whitespace-ness
differs between JS regexes and Oniguruma) are left out, and the count is printed.

Usage: /usr/bin/python3 build_corpus.py JS_CLASSES.bin OUT_DIR
"""
import gettext
import glob
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tools"))
import gen_unicode_tables  # noqa: E402


def read(path):
    with open(path, encoding="utf-8", errors="strict") as f:
        return f.read()


def catalog_text(lang, domains, limit):
    parts = []
    for domain in domains:
        path = f"/usr/share/locale/{lang}/LC_MESSAGES/{domain}.mo"
        with open(path, "rb") as f:
            catalog = gettext.GNUTranslations(f)._catalog
        for key in sorted(k for k in catalog if isinstance(k, str) and k):
            parts.append(catalog[key])
    text = "\n\n".join(parts)
    return text[:limit]


def wordnet_text(limit):
    lines = []
    for name in ("data.noun", "data.verb", "data.adj"):
        for line in open(f"/usr/share/wordnet/{name}", encoding="utf-8"):
            if line.startswith("  "):
                continue  # the license header, kept in NOTICE.md
            words = line.split(" | ")[0].split()[4:]
            gloss = line.split(" | ", 1)[1].strip() if " | " in line else ""
            lines.append(f"{' '.join(w for w in words[::2] if not w.isdigit())}: {gloss}")
            if sum(len(s) for s in lines) > limit // 3 * (1 + ("verb", "adj").count(name[5:])):
                break
    return "\n".join(lines)[:limit]


def code_text(patterns, limit):
    text = ""
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(REPO, pattern))):
            text += f"// ---- {os.path.relpath(path, REPO)} ----\n" + read(path)
    return text[:limit]


def emoji_text():
    zwj = "\u200d"
    pieces = [
        "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘",
        "👨" + zwj + "👩" + zwj + "👧" + zwj + "👦", "👩" + zwj + "💻", "🏳️" + zwj + "🌈",
        "👍🏻👍🏼👍🏽👍🏾👍🏿", "🇨🇳🇺🇸🇯🇵🇩🇪🇫🇷", "1️⃣2️⃣#️⃣*️⃣", "❤️❤︎☺️✌🏽",
        "🧑🏽" + zwj + "🚀", "👁️" + zwj + "🗨️", "🐈" + zwj + "⬛", "🏴‍☠️",
    ]
    rng = random.Random(7)
    out = []
    for i in range(400):
        words = ["I", "love", "this", "so much", "lol", "wait", "what", "ok", "great job", "see you"]
        out.append(f"{rng.choice(words)} {rng.choice(pieces)}{rng.choice(['', '!', '!!', '.', ' ', '?'])}")
        if i % 7 == 0:
            out.append("".join(rng.choice(pieces) for _ in range(rng.randint(1, 5))))
    return "\n".join(out)


def numbers_text():
    rng = random.Random(11)
    out = []
    for n in range(1, 30):
        out.append(str(rng.randrange(10 ** n)))
    for _ in range(300):
        kind = rng.randrange(8)
        if kind == 0:
            out.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 9)}f}")
        elif kind == 1:
            out.append(f"{rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        elif kind == 2:
            out.append(f"+1 ({rng.randint(100, 999)}) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}")
        elif kind == 3:
            out.append(f"{rng.randint(0, 10**12):,}")
        elif kind == 4:
            out.append(f"{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}")
        elif kind == 5:
            out.append(f"x{rng.randint(1, 999)}y{rng.randint(1, 99999)}z {rng.random():e}")
        elif kind == 6:
            out.append(f"0x{rng.getrandbits(64):x} 0b{rng.getrandbits(20):b} 1e{rng.randint(-30, 30)}")
        else:
            out.append(f"v{rng.randint(0, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}")
    out.append("１２３４５６７８９０ ٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९ ½ ¾ ⅓ ² ³ ¹⁰ Ⅻ ⅫⅣ 〇一二三 ①②③ 𝟙𝟚𝟛")
    out.append("π ≈ 3.14159265358979323846264338327950288419716939937510")
    out.append("12345678901234567890123456789012345678901234567890" * 3)
    return "\n".join(out)


def whitespace_text():
    rng = random.Random(13)
    seps = [" ", "  ", "   ", " " * 17, " " * 100, "\t", "\t\t", " \t ", "\n", "\n\n", "\r\n",
            "\r\n\r\n", "\r", "\n \n", " \n", "\n ", " \r\n ", "\u00a0", "\u3000", "\u2028",
            "\u2029", "\x0b", "\x0c", " " * 1000, "\n" * 20, "\t\n\t\n", "\u2003\u2009"]
    words = ["alpha", "beta", "你好", "x", "42", "(", "))", "--", "é", "»", "😀", "_", "a.b"]
    out = []
    for _ in range(1500):
        out.append(rng.choice(words))
        out.append(rng.choice(seps))
    return "".join(out) + "   \n\n\t  "


def special_tokens_text():
    specials = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>", "<｜User｜>",
                "<｜Assistant｜>", "<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>",
                "<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>", "<｜place▁holder▁no▁17｜>"]
    near = ["<｜User", "<｜User｜", "｜User｜>", "<|User|>", "<｜user｜>", "<｜Assistant", "<think>",
            "</think>", "<｜System｜>", "<<｜User｜>>", "<｜User｜><｜User｜>", "<｜end▁of▁sentence"]
    rng = random.Random(17)
    texts = ["Hello", " world", "你好", "\n", " ", "  ", "x=1;", "42", "...", "\t", "'s", "😀"]
    out = []
    for _ in range(1200):
        out.append(rng.choice(specials if rng.random() < 0.4 else (near if rng.random() < 0.5 else texts)))
    return "".join(out)


def odd_unicode_text():
    parts = [
        "e\u0301 a\u0308 n\u0303 o\u0302\u0323 Z\u0351\u0360\u0336\u0317a\u0334\u0328l\u0337g\u0315o\u0335",
        "\u0301\u0302 leading marks, \u20dd enclosing",
        "नमस्ते दुनिया क्षत्रिय", "السلام عليكم مَرْحَبًا", "שָׁלוֹם עוֹלָם", "สวัสดีครับ ภาษาไทย",
        "한국어 텍스트 각", "Ελληνικά κείμενο", "Русский текст, ёлка!", "ქართული", "Հայերեն",
        "ᏣᎳᎩ", "ⴰⵣⵓⵍ", "ꦲꦏ꧀ꦱꦫ", "𐌰𐌱𐌲 gothic", "𝐀𝐁𝐂 𝕏𝕐 math letters", "ﬁﬂ ligatures",
        "halfwidth ｱｲｳｴｵ ﾊﾟ fullwidth ＡＢＣ！？", "々〆〇ー・「」『』【】〜",
        "CJK ext B 𠀀𠀁𪜀 compat 豈更 radicals ⺀⼀", "unassigned \u0378\u0530\U00050000\u2fe0 here",
        "private use \ue000\uf8ff\U000f0000\U0010fffd noncharacters \ufdd0\uffff\U0001fffe",
        "controls \x01\x02\x1b[0m\x7f bidi \u200e\u200f\u202a\u202c isolate \u2066\u2069",
        "zero width \u200b\u200c\u200d\u2060 soft\u00adhyphen word\u034fjoiner",
        "variation \u2764\ufe0f \u2764\ufe0e \u845b\U000e0100 tags \U000e0074\U000e0065",
        "quotes “double” ‘single’ „low“ «guillemets» ‹single› apostrophe’s don't",
        "dashes – — ‐ ‒ ―, ellipsis …, bullets • ‣ ◦, arrows → ⇒ ↔, math ∑∫√∞≠≤≥±×÷",
        "currency $ € £ ¥ ₹ ₿ ¢, units ℃ ℉ µm Ω Å ㎞, marks © ® ™ § ¶ † ‡ ° ′ ″",
        "box ┌─┐│└┘ blocks ░▒▓█ shapes ■□▲△●○◆◇★☆ music ♩♪♫ chess ♔♕ cards ♠♥",
        "a'b 'quoted' it's we're they've I'm we'll he'd O'Neil rock'n'roll",
        "__init__ foo_bar __dunder__ snake_case kebab-case CamelCase x.y.z a::b a->b a=>b",
        "https://example.org/path?q=1&r=%20x#frag user@example.com C:\\Windows\\path",
    ]
    return "\n".join(parts * 3)


def random_mixture(seed, length):
    pool = (list(" \t\n\r") * 4 + list("aZq") * 6 + list("0179") * 3 +
            list(".,!?;:'\"()[]{}<>@#$%^&*-+=_/\\|~`") +
            ["漢", "字", "の", "ア", "ー", "ｱ", "가", "é", "ß", "ǅ", "\u0301", "\u0308", "\u200d",
             "\u00a0", "\u3000", "\u2028", "😀", "👍", "🏽", "«", "»", "“", "’", "—", "…", "٣", "½",
             "Ⅻ", "²", "€", "©", "々", "〇", "\U00020000", "\ue000", "\u0378", "\x01", "\u200b",
             "\u0915", "\u094d", "\u0627", "\u064e", "｜", "▁", "<｜User｜>", "<｜Assistant｜>"])
    rng = random.Random(seed)
    return "".join(rng.choice(pool) for _ in range(length))


def documents():
    docs = {
        "en_fortunes": read("/usr/share/games/fortunes/fortunes"),
        "en_wordnet": wordnet_text(30000),
        "en_gpl3": read("/usr/share/common-licenses/GPL-3"),
        "zh_messages": catalog_text("zh_CN", ["coreutils", "grep", "sed"], 40000),
        "ja_messages": catalog_text("ja", ["coreutils", "grep"], 15000),
        "code_cpp": code_text(["engine/tokenizer/*.cpp"], 30000),
        "code_python_cmake": code_text(["tools/*.py", "CMakeLists.txt", "*/CMakeLists.txt"], 15000),
        "emoji": emoji_text(),
        "numbers": numbers_text(),
        "whitespace": whitespace_text(),
        "special_tokens": special_tokens_text(),
        "odd_unicode": odd_unicode_text(),
    }
    for i in range(12):
        docs[f"random_{i:02d}"] = random_mixture(1000 + i, 1500)
    docs["empty"] = ""
    docs["one_space"] = " "
    return docs


def main():
    js = open(sys.argv[1], "rb").read()
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    total, dropped = 0, {}
    for name, text in documents().items():
        kept = []
        for ch in text:
            cp = ord(ch)
            if (gen_unicode_tables.flags_of(cp) & 63) != js[cp]:
                dropped[cp] = dropped.get(cp, 0) + 1
            else:
                kept.append(ch)
        data = "".join(kept).encode("utf-8")
        with open(os.path.join(out_dir, name + ".txt"), "wb") as f:
            f.write(data)
        total += len(data)
        print(f"{name:20s} {len(data):8d} bytes")
    print(f"total {total} bytes; left out {sum(dropped.values())} occurrences of "
          f"{len(dropped)} version-dependent code points: {[hex(c) for c in sorted(dropped)][:20]}")


if __name__ == "__main__":
    main()
