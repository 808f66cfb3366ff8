"""Sums in everyday sentences and word problems (tools/demo/arith_stories.py, arithmetic.generate's
story_share) and the development cells of sums in free wordings (tools/demo/dev_free_wordings.py):
the stories change the question only, and no training sentence is a development one."""

import json
import pathlib
import re
import tempfile
import unittest

import demo_support  # (also puts tools/ on the path)
from demo import arith_stories, arithmetic, dev_free_wordings, wording_grammar

def _plain(text):
    """A sentence without case, punctuation or spacing (what typing it casually leaves), its
    operation signs kept."""
    return re.sub(r"[^a-z0-9+*=-]", "", text.lower())


class StoriesTest(unittest.TestCase):
    def test_story_share_changes_the_question_only(self):
        stories = 0
        for seed in range(200):
            s = arithmetic.generate(seed, story_share=0.5)
            plain = arithmetic.generate(seed)
            self.assertEqual(repr(s.messages[1:]), repr(plain.messages[1:]))
            self.assertEqual((s.expected, s.meta), (plain.expected, plain.meta))
            if s.messages[0] != plain.messages[0]:
                self.assertIn(s.meta["op"], arith_stories.STORIES)  # products keep their wordings
                question = s.messages[0]["content"]
                self.assertIn(str(s.meta["a"]), question)
                self.assertIn(str(s.meta["b"]), question)
                stories += 1
        self.assertGreater(stories, 40)
        self.assertEqual(repr(arithmetic.generate(7, story_share=0.0).messages), repr(arithmetic.generate(7).messages))

    def test_every_story_names_each_operand_once_and_fills(self):
        for op, templates in arith_stories.STORIES.items():
            for template in templates:
                self.assertEqual((template.count("{a}"), template.count("{b}")), (1, 1), template)
                text = template.format(a=4321, b=1234, name="Ana", things="stamps", place="zoo", container="tank",
                                       units="litres")
                self.assertNotIn("{", text)

    def test_no_training_sentence_is_a_development_one(self):
        fill = {"a": 4321, "b": 1234, "name": "Ana", "things": "stamps", "place": "zoo", "container": "tank",
                "units": "litres"}
        lists = (arith_stories.STORIES, arithmetic.QUESTION_TEMPLATES, arithmetic.VARIED_TEMPLATES)
        training = {_plain(t.format(**fill)) for by_op in lists for templates in by_op.values() for t in templates}
        training |= {_plain(t.format(**fill)) for op in ("add", "sub", "mul")
                     for t in wording_grammar.wordings_of(op, "training")}
        for op, templates in dev_free_wordings.FREE_WORDINGS.items():
            for template in templates:
                self.assertNotIn(_plain(template.format(**fill)), training, template)

    def test_no_training_code_reads_the_free_wordings(self):
        self.assertEqual(demo_support.readers_of("dev_free_wordings", "FREE_WORDINGS"), [])


class FreeWordingsTest(unittest.TestCase):
    def test_the_cells_ask_each_wording_with_the_problems_answers(self):
        out = tempfile.mkdtemp()
        dev_free_wordings.main(["--out", out, "--n", "20"])
        items = [json.loads(line) for line in pathlib.Path(out, "eval.jsonl").read_text().splitlines()]
        self.assertEqual(len(items), 2 * 20 * 2)
        for op, wordings in dev_free_wordings.FREE_WORDINGS.items():
            mine = [it for it in items if it["meta"]["op"] == f"free_{op}"]
            self.assertEqual({it["meta"]["wording"] for it in mine}, set(range(len(wordings))))
            self.assertEqual({it["effort"] for it in mine}, {50, 75})
            for it in mine:
                a, b = it["meta"]["a"], it["meta"]["b"]
                self.assertEqual(it["messages"][0]["content"], wordings[it["meta"]["wording"]].format(a=a, b=b))
                self.assertEqual(it["expected"], str(a + b if op == "add" else a - b))
                self.assertIn(it["messages"][0]["content"], it["prompt_text"])


if __name__ == "__main__":
    unittest.main()
