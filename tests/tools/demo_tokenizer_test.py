"""flash-tiny tokenizer: file layout, DeepSeek-V3 pre-tokenizer splits, single digits, round trips."""

import json
import unittest

import demo_support
from demo import chat_format, mixture, pretokenizer
from demo.bpe_train import count_words, train_merges


class PreTokenizerTest(unittest.TestCase):
    def test_splits_worked_out_from_the_regexes(self):
        cases = {
            "Hello, world!  How are you?\n\nI have 12345 apples.":
                ["Hello", ",", " world", "!", " ", " How", " are", " you", "?\n\n", "I", " have", " ", "123", "45",
                 " apples", "."],
            "a\tb  c   ": ["a", "\tb", " ", " c", "   "],
            "don't stop-me": ["don", "'t", " stop", "-me"],
            "你好世界abc": ["你好世界", "abc"],
            "x\n  \n y": ["x", "\n  \n", " y"],
            " .x": [" .", "x"],
        }
        for text, pieces in cases.items():
            self.assertEqual(pretokenizer.pre_split(text), pieces, text)

    def test_byte_level_map_is_a_bijection(self):
        self.assertEqual(len(set(pretokenizer.BYTE_SYMBOLS)), 256)
        self.assertEqual(pretokenizer.byte_level(" é"), "Ġ" + "Ã©")


class TokenizerFileTest(unittest.TestCase):
    def setUp(self):
        self.tok = demo_support.tokenizer()
        with open(demo_support.TOKENIZER_JSON, encoding="utf-8") as f:
            self.data = json.load(f)

    def test_special_tokens_and_layout(self):
        self.assertEqual(self.tok.vocab_size, 8192)
        for spelling, tid in ((chat_format.BOS, 0), (chat_format.EOS, 1), (chat_format.PAD, 2)):
            self.assertEqual(self.tok.token_id(spelling), tid)
        ids = {self.tok.token_id(s) for s in chat_format.SPECIAL_TOKENS}
        self.assertEqual(len(ids), len(chat_format.SPECIAL_TOKENS))
        self.assertEqual(sorted(self.tok.id_to_token), list(range(8192)))  # no holes
        self.assertEqual(self.data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], "\\p{N}{1,3}")
        self.assertEqual(self.data["decoder"]["type"], "ByteLevel")

    def test_every_digit_is_one_token(self):
        ids = self.tok.encode("x 1234567890 = 42")
        digits = [self.tok.decode([i]) for i in ids if self.tok.decode([i]).isdigit()]
        self.assertEqual(digits, list("1234567890") + ["4", "2"])
        for merge in self.data["model"]["merges"]:
            self.assertFalse(any(c.isdigit() for c in merge.replace(" ", "")), merge)

    def test_round_trip_on_generated_data(self):
        for k in range(60):
            text = mixture.render_sample_text(mixture.generate_sample("eval", 9, k))
            ids = self.tok.encode(text)
            self.assertEqual(self.tok.decode(ids), text)
        for text in ("naïve café 😀 中文", "  spaces\t\tand\r\nlines  ", "<｜User｜>x<think>y</think>"):
            self.assertEqual(self.tok.decode(self.tok.encode(text)), text)

    def test_special_token_spellings_become_single_ids(self):
        ids = self.tok.encode("<｜User｜>hi<｜Assistant｜><think>")
        self.assertEqual(ids[0], self.tok.token_id(chat_format.USER))
        self.assertEqual(ids[-2:], [self.tok.token_id(chat_format.ASSISTANT), self.tok.token_id("<think>")])


class BpeTrainerTest(unittest.TestCase):
    def test_merges_follow_pair_frequency(self):
        counts = count_words(["low lower lowest low low", "new newer 123"])
        self.assertNotIn("123", "".join(counts))  # digit groups are not counted
        merges = train_merges(counts, 3)
        self.assertEqual(merges[0], ("l", "o"))  # 'lo' occurs in every low* word
        self.assertEqual(merges[1], ("lo", "w"))


if __name__ == "__main__":
    unittest.main()
