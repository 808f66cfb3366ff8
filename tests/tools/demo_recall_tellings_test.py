"""Facts told and asked in other sentences (tools/demo/recall_tellings.py, recall.generate's
told_share and asked_share) and the development cells of recall in free wordings
(tools/demo/dev_free_recall.py): the new sentences change only what is said, cover every kind of
fact, and no training sentence is a development one."""

import json
import pathlib
import re
import tempfile
import unittest

import demo_support  # (also puts tools/ on the path)
from demo import dev_free_recall, recall, recall_tellings, wording_grammar
from demo.rng import Rng

def _plain(text):
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _facts(n=400):
    rng = Rng(11)
    return [recall.make_fact(rng, rng.weighted(recall.FACT_KINDS)) for _ in range(n)]


class TellingsTest(unittest.TestCase):
    def test_every_kind_of_fact_has_sentences(self):
        kinds = set()
        for fact in _facts():
            kind, word = recall_tellings.kind_and_word(fact.key, fact.answer)
            self.assertIn(kind, recall_tellings.TOLD)
            self.assertIn(kind, recall_tellings.ASKED)
            self.assertIn(kind, dev_free_recall.FREE_STATEMENTS)
            kinds.add(kind)
            rng = Rng(3)
            self.assertIn(fact.value, recall_tellings.told(rng, fact))
            self.assertNotIn("{", recall_tellings.asked(rng, fact))
        self.assertEqual(kinds, set(recall_tellings.TOLD))

    def test_the_shares_change_what_is_said_only(self):
        changed = 0
        for seed in range(120):
            plain = recall.generate(seed, distance=300)
            s = recall.generate(seed, distance=300, told_share=0.5, asked_share=0.5)
            # the same facts and answer (the filler after them fills the distance left, which the
            # sentences' lengths move)
            self.assertEqual((s.expected, s.mode, s.effort, s.meta["fact_key"]),
                             (plain.expected, plain.mode, plain.effort, plain.meta["fact_key"]))
            self.assertEqual(s.messages[-1]["content"], plain.messages[-1]["content"])
            told = s.meta["mentions"][0]
            self.assertTrue(any(told in m["content"] for m in s.messages if m["role"] == "user"))
            if s.messages[-1].get("thinking"):
                self.assertEqual(s.messages[-1]["thinking"], f"The user told me earlier: {told}")
            changed += told != plain.meta["mentions"][0]
        self.assertGreater(changed, 30)
        self.assertEqual(repr(recall.generate(4, told_share=0.0, asked_share=0.0).messages),
                         repr(recall.generate(4).messages))

    def test_no_training_sentence_is_a_development_one(self):
        for fact in _facts(200):
            kind, word = recall_tellings.kind_and_word(fact.key, fact.answer)
            fill = {"v": fact.value, "w": word}
            training = {_plain(t.format(**fill)) for t in recall_tellings.TOLD[kind] + recall_tellings.ASKED[kind]}
            training |= {_plain(t.format(v=fact.value)) for t in fact.statements + fact.questions + list(fact.varied)}
            training |= {_plain(t.format(np=recall.noun_phrase(fact)))
                         for t in wording_grammar.wordings_of("recall", "training")}
            for dev in (dev_free_recall.FREE_STATEMENTS[kind], dev_free_recall.FREE_QUESTIONS[kind]):
                self.assertNotIn(_plain(dev.format(**fill)), training, (fact.key, dev))

    def test_no_training_code_reads_the_free_sentences(self):
        self.assertEqual(demo_support.readers_of("dev_free_recall", "FREE_STATEMENTS", "FREE_QUESTIONS"), [])


class FreeRecallTest(unittest.TestCase):
    def test_the_cells_tell_and_ask_in_the_free_sentences(self):
        out = tempfile.mkdtemp()
        dev_free_recall.main(["--out", out, "--n", "2"])
        items = [json.loads(line) for line in pathlib.Path(out, "eval.jsonl").read_text().splitlines()]
        self.assertEqual(len(items), 2 * len(dev_free_recall.DISTANCES) * 2)
        by_id = {it["id"]: it for it in items}
        for it in items:
            group = it["meta"]["cell_group"]
            self.assertIn(group, ("recall free", "recall free_told"))
            kind = it["meta"]["free_kind"]
            users = [m["content"] for m in it["messages"] if m["role"] == "user"]
            told = [u for u in users[:-1] if it["expected"] in u]
            self.assertTrue(told, it["id"])
            question = users[-1]
            if group == "recall free":
                self.assertIn(kind, dev_free_recall.FREE_QUESTIONS)
                self.assertNotIn(it["expected"], question)
                twin = by_id[it["id"].replace("recall-free-", "recall-free-told-")]
                self.assertEqual(twin["messages"][:-1], it["messages"][:-1])  # the same chat, asked as drawn
                self.assertNotEqual(twin["messages"][-1], it["messages"][-1])


if __name__ == "__main__":
    unittest.main()
