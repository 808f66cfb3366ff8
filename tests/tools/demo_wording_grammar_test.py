"""Questions worded from parts (tools/demo/wording_grammar.py; shapes.generate's and
arithmetic.generate's grammar_share): wide enough, two halves that never meet (training, and the
development set's `image wording` and `wording_add` / `wording_sub` cells), no wording near a
sealed phrasing, and the answers kept."""

import itertools
import json
import os
import re
import unittest

import numpy as np

import demo_support
from demo import arithmetic, followup, make_eval, recall, sealed_test, shapes, wording_grammar
from demo.rng import Rng
from demo.sample import score_answer
from demo.lexicon import SHAPE_PLURALS
from demo_wordings_test import _normal, _questions

_digest = demo_support.sample_digest


def _words(text):
    return re.findall(r"<\w+>|[a-z0-9']+", text.lower())


def _grams(words, n=4):
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _word_distance(a, b):
    """Words to insert, delete or replace to turn a into b."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def _our_forms(template):
    """The template's words with its fields as "<field>", and filled (a count with each of the
    nouns, so that "How many {what} ..." meets a sealed "How many things ...")."""
    whats = wording_grammar.SHAPE_NOUNS + tuple("red " + n for n in wording_grammar.COLOURED_NOUNS)
    filled = {template.format(what=w, shape="circle", colour="red", name="red circle")
              for w in (whats if "{what}" in template else ("",))}
    return [_words(_normal(template))] + [_words(t) for t in filled]


# The sealed phrasings' words, their fields as "<field>" (so only their own words can be met).
SEALED = [_words(_normal(p)) for p in itertools.chain(*sealed_test.TEST_PHRASES.values())]

_COLOUR = "(?:" + "|".join(shapes.SHAPE_COLOURS) + ")"
_SHAPE = "(?:" + "|".join(shapes.SHAPES) + ")"
_NOUNS = "(?:" + "|".join(sorted(set(wording_grammar.SHAPE_NOUNS + wording_grammar.COLOURED_NOUNS
                                     + tuple(SHAPE_PLURALS.values())))) + ")"
_FIELDS = {"<colour>": _COLOUR, "<shape>": _SHAPE, "<name>": f"{_COLOUR} {_SHAPE}",
           "<what>": f"(?:{_COLOUR} )?{_NOUNS}"}


def _strict_pattern(template):
    """A regex over _normal text matching the template with its fields filled by their own kind
    of value only (a colour, a shape, a count's noun)."""
    return " ".join(_FIELDS.get(w, re.escape(w)) for w in _normal(template).split())


def _halves(test, kind, min_training, min_dev):
    """A kind's two halves, checked wide enough, each wording once and in one half only."""
    training, dev = wording_grammar.training_wordings(kind), wording_grammar.dev_wordings(kind)
    test.assertGreaterEqual(len(training), min_training, kind)
    test.assertGreaterEqual(len(dev), min_dev, kind)
    test.assertEqual(len(set(training)) + len(set(dev)), len(training) + len(dev), kind)
    test.assertFalse(set(training) & set(dev), kind)
    return training, dev


class WordingGrammarTest(unittest.TestCase):
    def test_every_kind_is_wide_and_its_halves_never_meet(self):
        for kind in wording_grammar.PICTURE_FRAMES:
            training, dev = _halves(self, kind, 50, 10)
            for t in training:
                self.assertFalse(wording_grammar.is_dev(t), t)
            for t in dev:
                self.assertTrue(wording_grammar.is_dev(t), t)
            # no wording names the picture twice ("Does the picture show ... in the picture?")
            for t in training + dev:
                self.assertLessEqual(len(re.findall(r"\b(?:picture|image)\b", t)), 1, t)

    def test_no_wording_is_near_a_sealed_phrasing(self):
        for kind in wording_grammar.PICTURE_FRAMES:
            for template in wording_grammar.training_wordings(kind) + wording_grammar.dev_wordings(kind):
                for ours in _our_forms(template):
                    for theirs in SEALED:
                        # not the same, not four words in a row of one, not one word away from one
                        self.assertFalse(_grams(ours) & _grams(theirs), (template, ours, theirs))
                        self.assertGreater(_word_distance(ours, theirs), 1, (template, ours, theirs))

    def test_off_keeps_every_sample(self):
        for seed in range(40):
            self.assertEqual(_digest(shapes.generate(seed)), _digest(shapes.generate(seed, grammar_share=0.0)))
            options = dict(check_step=True, unknown_share=0.1, paraphrase_share=0.3, sizes=[168, 210])
            self.assertEqual(_digest(shapes.generate(seed, **options)),
                             _digest(shapes.generate(seed, grammar_share=0.0, **options)))

    def test_on_rewords_the_question_and_keeps_the_answer(self):
        kinds = set()
        for seed in range(400):
            plain = shapes.generate(seed, n_questions=1, check_step=True, unknown_share=0.15)
            worded = shapes.generate(seed, n_questions=1, check_step=True, unknown_share=0.15, grammar_share=1.0)
            np.testing.assert_array_equal(plain.images[0], worded.images[0])
            self.assertEqual((plain.expected, plain.distractors, plain.mode, plain.effort, plain.meta["question_kind"]),
                             (worded.expected, worded.distractors, worded.mode, worded.effort,
                              worded.meta["question_kind"]))
            self.assertEqual(plain.messages[1], worded.messages[1])  # the same answer and thinking
            kind, (q,) = worded.meta["question_kind"], _questions(worded)
            kinds.add(kind)
            if kind == "describe":  # not reworded: it has no short answer
                self.assertEqual(_questions(plain), [q])
                continue
            self.assertTrue(score_answer(worded.expected, worded.final_answer(), worded.match, worded.distractors))
        self.assertEqual(kinds, {"count_all", "count_shape", "count_colour", "count_both", "exists", "colour_of",
                                 "shape_of", "position", "size", "describe", "cant_tell"})

    def test_each_half_draws_its_own_wordings(self):
        lead_ins = "|".join(re.escape(_normal(lead) + " ") for lead in shapes.wordings.PICTURE_LEAD_INS)
        patterns = {split: [re.compile(f"(?:{lead_ins})?" + _strict_pattern(t))
                            for kind in wording_grammar.PICTURE_FRAMES for t in pick(kind)]
                    for split, pick in (("training", wording_grammar.training_wordings),
                                        ("dev", wording_grammar.dev_wordings))}
        for split, other in (("training", "dev"), ("dev", "training")):
            drawn = 0
            for seed in range(300):
                s = shapes.generate(seed, n_questions=1, grammar_share=1.0, wording_split=split)
                if s.meta["question_kind"] == "describe":
                    continue
                q = _normal(_questions(s)[0])
                self.assertTrue(any(p.fullmatch(q) for p in patterns[split]), (split, q))
                self.assertFalse(any(p.fullmatch(q) for p in patterns[other]), (split, q))
                drawn += 1
            self.assertGreater(drawn, 200)
        with self.assertRaises(ValueError):
            shapes.generate(0, grammar_share=1.0, wording_split="test")


SEALED_ARITHMETIC = [_words(_normal(p)) for p in itertools.chain(*sealed_test.ARITH_PHRASES.values())]


class ArithmeticWordingGrammarTest(unittest.TestCase):
    def test_every_operation_is_wide_and_its_halves_never_meet(self):
        for op in wording_grammar.ARITH_FRAMES:
            training, dev = _halves(self, op, 100, 20)
            for t in training + dev:
                self.assertEqual(set(re.findall(r"\{(\w+)\}", t)), {"a", "b"}, t)
                self.assertFalse(t.startswith(("I ", "I'")), t)  # a lead-in lower-cases the first letter

    def test_no_wording_is_near_a_sealed_phrasing(self):
        for op in wording_grammar.ARITH_FRAMES:
            for template in wording_grammar.training_wordings(op) + wording_grammar.dev_wordings(op):
                ours = _words(_normal(template))
                for theirs in SEALED_ARITHMETIC:
                    self.assertFalse(_grams(ours) & _grams(theirs), (template, theirs))
                    self.assertGreater(_word_distance(ours, theirs), 1, (template, theirs))

    def test_off_keeps_every_sample_and_on_keeps_the_answer(self):
        lead_ins = "|".join(re.escape(lead.lower()) for lead in arithmetic.LEAD_INS)

        def pattern(t):  # the symbols kept: "{a} + {b}" and "{a} - {b}" are other wordings
            body = re.escape(t.lower().rstrip(".?")).replace(r"\{a\}", "[0-9]+").replace(r"\{b\}", "[0-9]+")
            return re.compile(f"(?:{lead_ins})?{body}")

        def typed(question):
            return question.lower().rstrip(".?")

        dev_patterns = [pattern(t) for op in wording_grammar.ARITH_FRAMES for t in wording_grammar.dev_wordings(op)]
        changed = 0
        for seed in range(200):
            plain = arithmetic.generate(seed, level2_columns=True)
            self.assertEqual(_digest(plain), _digest(arithmetic.generate(seed, level2_columns=True, grammar_share=0.0)))
            worded = arithmetic.generate(seed, level2_columns=True, grammar_share=1.0)
            self.assertEqual(plain.messages[1:], worded.messages[1:])  # the same answer and thinking
            self.assertEqual((plain.expected, plain.effort, plain.mode), (worded.expected, worded.effort, worded.mode))
            changed += plain.messages[0] != worded.messages[0]
            q = typed(worded.messages[0]["content"])
            self.assertFalse(any(p.fullmatch(q) for p in dev_patterns), q)
            dev = typed(arithmetic.generate(seed, grammar_share=1.0, wording_split="dev").messages[0]["content"])
            self.assertTrue(any(p.fullmatch(dev) for p in dev_patterns), dev)
        self.assertGreater(changed, 190)
        with self.assertRaises(ValueError):
            arithmetic.generate(0, grammar_share=1.0, wording_split="test")

    def test_followup_passes_the_option_on(self):
        changed = sum(_digest(followup.generate(seed)) !=
                      _digest(followup.generate(seed, arithmetic_options={"grammar_share": 1.0}))
                      for seed in range(30))
        self.assertGreater(changed, 10)


def _typed(question):
    return question.lower().rstrip(" ?.!")


def _facts(draws=300):
    """Facts of every kind, many values."""
    rng = Rng(7)
    return [recall.make_fact(rng, kind) for _ in range(draws) for kind, _ in recall.FACT_KINDS]


class RecallWordingGrammarTest(unittest.TestCase):
    def test_wide_and_no_wording_near_a_sealed_one(self):
        training, dev = _halves(self, "recall", 50, 8)
        seen = set()
        for fact in _facts(40):
            if fact.key in seen:
                continue
            seen.add(fact.key)
            sealed = {tuple(_words(sealed_test.recall_question(Rng(seed), fact.key))) for seed in range(20)}
            for template in training + dev:
                ours = _words(template.format(np=recall.noun_phrase(fact)))
                for theirs in sealed:  # the fact's own name ("my sister's name") may be shared, no more
                    self.assertFalse(_grams(ours, 5) & _grams(list(theirs), 5), (template, fact.key, theirs))
                    self.assertGreater(_word_distance(ours, list(theirs)), 1, (template, fact.key, theirs))

    def test_off_keeps_every_sample_and_on_keeps_the_answer(self):
        dev = {_typed(t) for t in wording_grammar.dev_wordings("recall")}
        changed = 0
        for seed in range(60):
            options = dict(distance=300, extra_questions=1.0, max_facts=4, varied_share=0.3)
            plain = recall.generate(seed, **options)
            self.assertEqual(_digest(plain), _digest(recall.generate(seed, grammar_share=0.0, **options)))
            worded = recall.generate(seed, grammar_share=1.0, **options)
            # the same fact asked and answered (the filler follows the question's length)
            self.assertEqual(plain.messages[-1], worded.messages[-1])
            self.assertEqual((plain.expected, plain.distractors, plain.meta["fact_key"]),
                             (worded.expected, worded.distractors, worded.meta["fact_key"]))
            changed += plain.messages[-2] != worded.messages[-2]
            asked = recall.generate(seed, distance=300, final_only=True, grammar_share=1.0, wording_split="dev")
            fact_np = recall.noun_phrase(_fact_of(asked))
            question = _typed(asked.messages[-2]["content"])
            self.assertTrue(any(question.endswith(_typed(t.format(np=fact_np))) for t in dev), question)
        self.assertGreater(changed, 50)
        with self.assertRaises(ValueError):
            recall.generate(0, grammar_share=1.0, wording_split="test")


def _fact_of(sample):
    """The asked fact of a recall sample, rebuilt from its key and answer."""
    answer = sample.messages[-1]["content"]
    return recall.Fact(sample.meta["fact_key"], sample.expected, [], [], answer, "", [])


class TrainedElsewhereTest(unittest.TestCase):
    def test_no_development_wording_is_a_question_another_generator_trains(self):
        """The development half measures wordings never trained: a wording that shapes._question,
        wordings.PICTURE_WORDINGS, arithmetic's templates or a fact's own questions already ask
        belongs to training (wording_grammar.TRAINED_ELSEWHERE)."""
        picture = [re.compile(_strict_pattern(t.rstrip(".?")))
                   for kind in wording_grammar.PICTURE_FRAMES for t in wording_grammar.dev_wordings(kind)]
        for seed in range(1500):
            for options in ({}, {"paraphrase_share": 1.0, "unknown_share": 0.2}, {"short_counts": True}):
                for q in _questions(shapes.generate(seed, n_questions=3, **options)):
                    self.assertFalse(any(p.fullmatch(_normal(q)) for p in picture), q)
        lead_ins = "|".join(re.escape(lead.lower()) for lead in arithmetic.LEAD_INS)
        sums = [re.compile(f"(?:{lead_ins})?" + re.escape(_typed(t)).replace(r"\{a\}", "[0-9]+")
                           .replace(r"\{b\}", "[0-9]+"))
                for op in wording_grammar.ARITH_FRAMES for t in wording_grammar.dev_wordings(op)]
        for seed in range(1500):
            for options in ({}, {"varied_share": 1.0}):
                q = _typed(arithmetic.generate(seed, **options).messages[0]["content"])
                self.assertFalse(any(p.fullmatch(q) for p in sums), q)
        for fact in _facts(300):
            asked = {_typed(q.format(v="")) for q in fact.questions} | {_typed(q) for q in fact.varied}
            for t in wording_grammar.dev_wordings("recall"):
                self.assertNotIn(_typed(t.format(np=recall.noun_phrase(fact))), asked, (t, fact.key))


class DevelopmentCellsTest(unittest.TestCase):
    def test_the_committed_cells_are_what_make_eval_writes_and_score_their_reference(self):
        """assets/eval/demo's wording cells as make_eval.py writes them today: a change of the
        frames or the halves changes the development set, and must be written (and measured) again."""
        path = os.path.join(demo_support.REPO, "assets/eval/demo/eval.jsonl")
        with open(path, encoding="utf-8") as f:
            committed = [json.loads(line) for line in f]
        ours = (list(make_eval.wording_items(80, 0)) + list(make_eval.arithmetic_wording_items(20, 0))
                + list(make_eval.recall_wording_items(demo_support.tokenizer(), 10, 0, 4096))
                + list(make_eval.arithmetic_later_items(20, 0)))
        self.assertEqual([i for i in committed if "wording" in i["id"]], json.loads(json.dumps(ours)))
        self.assertEqual(len(ours), 74 + 80 + 30 + 80)
        for item in ours:
            ref = item["reference"]["answer"]
            self.assertTrue(score_answer(item["expected"], ref, item["match"], item["distractors"]), item["id"])


if __name__ == "__main__":
    unittest.main()
