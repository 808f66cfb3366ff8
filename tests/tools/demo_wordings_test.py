"""Wider question wordings (issue 21): picture paraphrases (shapes.generate's paraphrase_share), varied
arithmetic and recall questions (varied_share). Off by default with every earlier sample unchanged;
on, they reword about the asked share of questions, keep the answers and their form, and never use
a wording of the sealed test set (tools/demo/sealed_test.py), which must stay unseen."""

import re
import unittest

import numpy as np

import demo_support
from demo import arithmetic, followup, recall, sealed_test, shapes, wordings
from demo.lexicon import SHAPE_PLURALS
from demo.rng import Rng
from demo.sample import score_answer

_digest = demo_support.sample_digest  # the whole sample, hashed


def _normal(text):
    """Lower-case words, placeholders kept as "<field>", punctuation dropped."""
    return " ".join(re.findall(r"<\w+>|[a-z0-9]+", re.sub(r"\{(\w+)\}", r" <\1> ", text.lower())))


def _pattern(template):
    """A regex over _normal text matching the template with any one- or two-word values filled in."""
    parts = [r"[a-z0-9]+(?: [a-z0-9]+)?" if w.startswith("<") else re.escape(w) for w in _normal(template).split()]
    return re.compile(" ".join(parts))


def _grams(text, n):
    words = _normal(text).split()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _questions(sample):
    """The user questions of a picture sample, in order."""
    return [m["content"][1]["text"] if isinstance(m["content"], list) else m["content"]
            for m in sample.messages if m["role"] == "user"]


SEALED_PICTURE = [p for phrases in sealed_test.TEST_PHRASES.values() for p in phrases]
SEALED_ARITHMETIC = [p for phrases in sealed_test.ARITH_PHRASES.values() for p in phrases]
OUR_PICTURE = [t for templates in wordings.PICTURE_WORDINGS.values() for t in templates]
OUR_ARITHMETIC = [t for templates in arithmetic.VARIED_TEMPLATES.values() for t in templates]
LEAD_INS = "|".join(re.escape(_normal(lead) + " ") for lead in wordings.PICTURE_LEAD_INS)
OUR_PATTERNS = [re.compile(f"(?:{LEAD_INS})?" + _pattern(t).pattern) for t in OUR_PICTURE]


def _recall_wordings(draws=300):
    """{fact key: the varied wordings make_fact gives it}, over many facts of every kind."""
    out = {}
    rng = Rng(5)
    for _ in range(draws):
        for kind, _ in recall.FACT_KINDS:
            fact = recall.make_fact(rng, kind)
            out.setdefault(fact.key, set()).update(fact.varied)
    return out


class SealedWordingsTest(unittest.TestCase):
    def test_no_template_is_a_sealed_wording(self):
        for ours, sealed in ((OUR_PICTURE, SEALED_PICTURE), (OUR_ARITHMETIC, SEALED_ARITHMETIC)):
            sealed_normal = {_normal(p) for p in sealed}
            for template in ours:
                self.assertNotIn(_normal(template), sealed_normal, template)
                # nor four words in a row of one: a paraphrase of ours, not a near-copy of theirs
                for p in sealed:
                    self.assertFalse(_grams(template, 4) & _grams(p, 4), (template, p))

    def test_no_drawn_question_is_a_sealed_wording(self):
        patterns = [_pattern(p) for p in SEALED_PICTURE]
        for seed in range(300):
            s = shapes.generate(seed, n_questions=3, paraphrase_share=1.0, unknown_share=0.2)
            for q in _questions(s):
                self.assertFalse(any(p.fullmatch(_normal(q)) for p in patterns), q)
        patterns = [_pattern(p) for p in SEALED_ARITHMETIC]
        for seed in range(300):
            q = arithmetic.generate(seed, varied_share=1.0).messages[0]["content"]
            self.assertFalse(any(p.fullmatch(_normal(q)) for p in patterns), q)

    def test_no_recall_wording_is_a_sealed_one(self):
        for key, ours in _recall_wordings().items():
            self.assertTrue(ours, key)
            sealed = {sealed_test.recall_question(Rng(seed), key) for seed in range(20)}
            for q in ours:
                self.assertNotIn(_normal(q), {_normal(p) for p in sealed}, (key, q))
                for p in sealed:  # the fact's own name ("my sister's name") may be shared, no more
                    self.assertFalse(_grams(q, 5) & _grams(p, 5), (q, p))


class PictureParaphraseTest(unittest.TestCase):
    def test_off_keeps_every_sample(self):
        for seed in range(40):
            self.assertEqual(_digest(shapes.generate(seed)), _digest(shapes.generate(seed, paraphrase_share=0.0)))
            options = dict(check_step=True, short_counts=True, unknown_share=0.1, sizes=[168, 210], soft_share=0.5)
            self.assertEqual(_digest(shapes.generate(seed, **options)),
                             _digest(shapes.generate(seed, paraphrase_share=0.0, **options)))

    def test_on_rewords_about_the_share_and_changes_nothing_else(self):
        asked = changed = 0
        for seed in range(300):
            plain = shapes.generate(seed, check_step=True, unknown_share=0.1)
            worded = shapes.generate(seed, check_step=True, unknown_share=0.1, paraphrase_share=0.3)
            np.testing.assert_array_equal(plain.images[0], worded.images[0])
            self.assertEqual((plain.expected, plain.distractors, plain.mode, plain.effort),
                             (worded.expected, worded.distractors, worded.mode, worded.effort))
            for a, b in zip(plain.messages, worded.messages):
                if a["role"] == "assistant":
                    self.assertEqual(a, b)  # same answer and thinking
            pairs = list(zip(_questions(plain), _questions(worded)))
            asked += len(pairs)
            changed += sum(a != b for a, b in pairs)
        self.assertGreater(asked, 400)
        self.assertAlmostEqual(changed / asked, 0.3, delta=0.07)

    def test_every_kind_is_reworded_and_its_answer_keeps_its_form(self):
        kinds = set()
        for seed in range(400):
            s = shapes.generate(seed, n_questions=1, paraphrase_share=1.0, unknown_share=0.15)
            kind, (q,), a = s.meta["question_kind"], _questions(s), s.final_answer()
            kinds.add(kind)
            self.assertTrue(any(p.fullmatch(_normal(q)) for p in OUR_PATTERNS), q)
            if kind == "describe":
                self.assertTrue(a.startswith("I see "), a)
                continue
            self.assertTrue(score_answer(s.expected, a, s.match, s.distractors), (q, a))
            # yes/no questions are answered "Yes." or "No.", the others never
            self.assertEqual(kind == "exists", a in ("Yes.", "No."), (q, a))
            # the question names what it is about (a colour or a shape; count_all counts "shapes")
            words = list(shapes.SHAPE_COLOURS) + list(shapes.SHAPES) + list(SHAPE_PLURALS.values()) + ["shapes"]
            self.assertTrue(any(re.search(rf"\b{w}\b", q.lower()) for w in words), q)
        self.assertEqual(kinds, {"count_all", "count_shape", "count_colour", "count_both", "exists", "colour_of",
                                 "shape_of", "position", "size", "describe", "cant_tell"})

    def test_wide_enough_and_safe_to_lead_in(self):
        for group, templates in wordings.PICTURE_WORDINGS.items():
            self.assertGreaterEqual(len(set(templates)), 8, group)
        for template in OUR_PICTURE + OUR_ARITHMETIC:
            self.assertFalse(template.startswith(("I ", "I'")), template)  # a lead-in lower-cases the first letter
        self.assertEqual(wordings.casual("Where's the red circle?"), "where's the red circle")
        forms = {wordings.vary(Rng(seed), "Count all the shapes.", ("In this picture, ",)) for seed in range(200)}
        self.assertEqual(forms, {"Count all the shapes.", "count all the shapes",
                                 "In this picture, count all the shapes."})


class ArithmeticWordingTest(unittest.TestCase):
    def test_off_keeps_every_sample(self):
        for seed in range(60):
            self.assertEqual(_digest(arithmetic.generate(seed)), _digest(arithmetic.generate(seed, varied_share=0.0)))
            self.assertEqual(_digest(followup.generate(seed, arithmetic_options={"level2_columns": True})),
                             _digest(followup.generate(seed, arithmetic_options={"level2_columns": True,
                                                                                 "varied_share": 0.0})))

    def test_on_rewords_about_the_share_with_the_same_answer(self):
        changed, ops = 0, set()
        for seed in range(500):
            plain, varied = arithmetic.generate(seed), arithmetic.generate(seed, varied_share=0.3)
            self.assertEqual(plain.messages[1:], varied.messages[1:])  # answer and thinking
            self.assertEqual((plain.expected, plain.match), (varied.expected, varied.match))
            q = varied.messages[0]["content"]
            if q != plain.messages[0]["content"]:
                changed += 1
                ops.add(varied.meta["op"])
                self.assertIn(str(varied.meta["a"]), q)
                self.assertIn(str(varied.meta["b"]), q)
                self.assertTrue(score_answer(varied.expected, varied.final_answer(), varied.match))
        self.assertAlmostEqual(changed / 500, 0.3, delta=0.07)
        self.assertEqual(ops, {"add", "sub", "mul"})

    def test_followup_passes_the_option_on(self):
        changed = 0
        for seed in range(100):
            plain = followup.generate(seed, final="arithmetic")
            varied = followup.generate(seed, final="arithmetic", arithmetic_options={"varied_share": 1.0})
            self.assertEqual(plain.messages[:-2], varied.messages[:-2])  # the earlier turns
            self.assertEqual(plain.final_answer(), varied.final_answer())
            changed += plain.messages[-2] != varied.messages[-2]
        self.assertGreater(changed, 90)


class RecallWordingTest(unittest.TestCase):
    WORDINGS = _recall_wordings(50)

    def varied_body(self, question, key):
        """Whether question, less its prefix, is one of the fact's varied wordings (maybe typed casually)."""
        prefix = next(p for p in sorted(recall.QUESTION_PREFIXES, key=len, reverse=True) if question.startswith(p))
        ours = self.WORDINGS[key]
        return question[len(prefix):] in ours | {wordings.casual(w) for w in ours}

    def test_off_keeps_every_sample(self):
        for seed in range(30):
            self.assertEqual(_digest(recall.generate(seed)), _digest(recall.generate(seed, varied_share=0.0)))
            self.assertEqual(_digest(recall.generate(seed, extra_questions=1.0, max_facts=6)),
                             _digest(recall.generate(seed, extra_questions=1.0, max_facts=6, varied_share=0.0)))

    def test_on_rewords_the_final_question_about_the_share_with_the_same_answer(self):
        changed = 0
        for seed in range(300):
            plain = recall.generate(seed, distance=200)
            varied = recall.generate(seed, distance=200, varied_share=0.3)
            # the same facts told and asked for, the same answer; the filler before the question may
            # differ, as it fills the distance that is left after the question
            self.assertEqual((plain.meta["fact_key"], plain.meta["mentions"], plain.expected, plain.distractors),
                             (varied.meta["fact_key"], varied.meta["mentions"], varied.expected, varied.distractors))
            self.assertEqual(plain.messages[-1], varied.messages[-1])
            self.assertTrue(score_answer(varied.expected, varied.final_answer(), varied.match, varied.distractors))
            if plain.messages[-2] != varied.messages[-2]:
                changed += 1
                self.assertTrue(self.varied_body(varied.messages[-2]["content"], varied.meta["fact_key"]))
        self.assertAlmostEqual(changed / 300, 0.3, delta=0.08)

    def test_extra_questions_are_reworded_too(self):
        for seed in range(40):
            plain = recall.generate(seed, distance=200, n_facts=3, extra_questions=1.0)
            varied = recall.generate(seed, distance=200, n_facts=3, extra_questions=1.0, varied_share=1.0)
            answers = lambda s: sorted(m["content"] for m in s.messages[-5::2])  # the three facts asked for
            self.assertEqual(answers(plain), answers(varied))
            for question in varied.messages[-6::2]:
                self.assertEqual(question["role"], "user")
                self.assertTrue(any(self.varied_body(question["content"], k) for k in self.WORDINGS), question)


if __name__ == "__main__":
    unittest.main()
