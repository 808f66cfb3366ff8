"""Task generators: determinism by seed, arithmetic correctness, effort monotonicity, recall distance."""

import hashlib
import re
import unittest

import demo_support
from demo import arithmetic, conversation, copy_task, followup, mixture, prose, recall, shapes
from demo.sample import score_answer


def _digest(sample):
    h = hashlib.sha256(repr((sample.task, sample.messages, sample.mode, sample.effort, sample.expected)).encode())
    for img in sample.images:
        h.update(img.tobytes())
    return h.hexdigest()


class DeterminismTest(unittest.TestCase):
    def test_same_seed_same_sample_different_seed_different(self):
        for k in range(40):
            a, b = mixture.generate_sample("train", 3, k), mixture.generate_sample("train", 3, k)
            self.assertEqual(_digest(a), _digest(b))
        train = {_digest(mixture.generate_sample("train", 3, k)) for k in range(40)}
        evals = {_digest(mixture.generate_sample("eval", 3, k)) for k in range(40)}
        self.assertEqual(len(train), 40)
        self.assertFalse(train & evals)

    def test_every_task_generates(self):
        for gen in (arithmetic.generate, conversation.generate, prose.generate, shapes.generate, recall.generate,
                    copy_task.generate):
            for seed in range(25):
                s = gen(seed)
                self.assertEqual(s.messages[-1]["role"], "assistant")
                self.assertEqual(s.effort is None, s.mode == "chat")


class ArithmeticTest(unittest.TestCase):
    def test_answers_and_written_work_are_correct(self):
        for seed in range(300):
            s = arithmetic.generate(seed, effort=100, mode="thinking")
            a, b, op = s.meta["a"], s.meta["b"], s.meta["op"]
            want = {"add": a + b, "sub": a - b, "mul": a * b}[op]
            self.assertEqual(s.final_answer(), str(want))
            thinking = s.final_thinking()
            self.assertTrue(thinking.endswith(f"answer {want}"))
            # Every column step holds: x+y+c=s, x-y-b=d, x*d+c=p (three-operand terms only).
            steps = re.findall(r"(?<![\d+])(\d+)([+*-])(\d)([+-])(\d)=(\d+)", thinking)
            self.assertTrue(steps)
            for x, sym, y, sym2, c, r in steps:
                x, y, c, r = int(x), int(y), int(c), int(r)
                got = {"+": x + y, "*": x * y, "-": x - y}[sym]
                got = got + c if sym2 == "+" else got - c
                self.assertEqual(got, r, thinking)

    def test_thinking_grows_with_effort(self):
        for seed in range(60):
            lengths = [len(arithmetic.generate(seed, effort=e, mode="thinking").final_thinking()) for e in range(1, 101)]
            self.assertEqual(lengths, sorted(lengths))
            self.assertEqual(lengths[0], 0)
            self.assertGreater(lengths[99], lengths[74])
            self.assertGreater(lengths[74], lengths[49])
            self.assertGreater(lengths[49], lengths[24])
        self.assertEqual([arithmetic.thinking_level(e) for e in (1, 20, 21, 40, 41, 60, 61, 85, 86, 100)],
                         [0, 0, 1, 1, 2, 2, 3, 3, 4, 4])

    def test_level2_columns_work_the_sum_and_keep_the_growth(self):
        for seed in range(60):
            def thinking(e, columns=True):
                return arithmetic.generate(seed, effort=e, mode="thinking", level2_columns=columns).final_thinking()
            lengths = [len(thinking(e)) for e in range(1, 101)]
            self.assertEqual(lengths, sorted(lengths))
            self.assertGreater(lengths[99], lengths[74])
            self.assertGreater(lengths[74], lengths[49])
            self.assertGreater(lengths[49], lengths[24])
            s = arithmetic.generate(seed, effort=50, mode="thinking", level2_columns=True)
            self.assertTrue(s.final_thinking().endswith(f"answer {s.final_answer()}"))
            level2, level3 = thinking(50).splitlines(), thinking(75).splitlines()
            self.assertEqual([line for line in level3 if not line.startswith("plan:")], level2)
            for e in (10, 30, 75, 100):  # only level 2 changes
                self.assertEqual(thinking(e), thinking(e, False))
            self.assertEqual(_digest(arithmetic.generate(seed)), _digest(arithmetic.generate(seed, level2_columns=False)))

    def test_same_problem_at_every_effort(self):
        seen = {(s.meta["a"], s.meta["b"], s.meta["op"]) for s in
                (arithmetic.generate(7, effort=e, mode="thinking") for e in (25, 50, 75, 100))}
        self.assertEqual(len(seen), 1)


class RecallTest(unittest.TestCase):
    def test_distance_follows_the_request(self):
        tok = demo_support.tokenizer()

        def count(text):
            return len(tok.encode(text))

        for target in (200, 1000, 4000):
            for k in range(3):
                s = recall.generate(100 * target + k, distance=target, count_tokens=count, final_only=True)
                d = recall.measure_distance(s, tok)
                self.assertLessEqual(abs(d - target), 0.1 * target + 40, (target, d))
                self.assertTrue(score_answer(s.expected, s.final_answer(), s.match, s.distractors))
                rendered = "".join(m["content"] for m in s.messages[:2] if isinstance(m["content"], str))
                self.assertIn(s.expected, rendered + s.meta["mentions"][0])

    def test_extra_questions_ask_the_other_facts_before_the_final_one(self):
        for seed in range(20):
            s = recall.generate(seed, distance=300, n_facts=3, extra_questions=1.0)
            answers = [m["content"] for m in s.messages if m["role"] == "assistant"]
            values = [v for v in [s.expected] + [d for d in s.distractors] if any(v in a for a in answers[-3:])]
            self.assertIn(s.expected, answers[-1])  # the final question is still the target's
            self.assertGreaterEqual(len(values), 3, answers[-3:])  # all three facts asked for
            # Every value asked for at the end was stated in an earlier user turn.
            users = " ".join(m["content"] for m in s.messages[:-6] if m["role"] == "user")
            for a in answers[-3:-1]:
                self.assertTrue(any(v in users for v in s.distractors if v in a), a)

    def test_extra_questions_leave_eval_samples_and_the_old_stream_alone(self):
        for seed in range(10):
            self.assertEqual(_digest(recall.generate(seed)), _digest(recall.generate(seed, extra_questions=0.0)))
            self.assertEqual(_digest(recall.generate(seed, final_only=True)),
                             _digest(recall.generate(seed, final_only=True, extra_questions=1.0)))
        changed = sum(_digest(recall.generate(seed)) != _digest(recall.generate(seed, extra_questions=1.0))
                      for seed in range(20))
        self.assertGreater(changed, 5)  # samples of 2-3 facts gain questions
        self.assertEqual(_digest(recall.generate(3)), _digest(recall.generate(3, max_facts=3)))

    def test_more_facts_when_asked(self):
        counts = {recall.generate(seed, distance=300, max_facts=6).meta["n_facts"] for seed in range(60)}
        self.assertEqual(counts, set(range(1, 7)))

    def test_answer_scoring(self):
        self.assertTrue(score_answer("teal", "Your favourite colour is teal.", distractors=["red"]))
        self.assertFalse(score_answer("teal", "Your favourite colour is red.", distractors=["red"]))
        self.assertFalse(score_answer("top", "It is at the top left.", distractors=["top left"]))
        self.assertTrue(score_answer("42", "42", match="exact"))
        self.assertFalse(score_answer("42", "420", match="exact"))



class CopyTaskTest(unittest.TestCase):
    def test_the_answer_is_what_the_user_gave(self):
        kinds = set()
        for seed in range(200):
            s = copy_task.generate(seed)
            kinds.add((s.meta["kind"], s.mode))
            users = " ".join(m["content"] for m in s.messages if m["role"] == "user")
            self.assertIn(s.expected, users)  # only looking back can predict it
            self.assertIn(s.expected, s.final_answer())
            self.assertEqual(s.final_thinking(), "")
            self.assertTrue(score_answer(s.expected, s.final_answer(), s.match))
        self.assertEqual(kinds, {("repeat", "thinking"), ("repeat", "chat"),
                                 ("introduce", "thinking"), ("introduce", "chat")})

    def test_same_seed_same_sample_and_bad_kind_refused(self):
        self.assertEqual(_digest(copy_task.generate(7)), _digest(copy_task.generate(7)))
        self.assertNotEqual(_digest(copy_task.generate(7)), _digest(copy_task.generate(8)))
        with self.assertRaises(ValueError):
            copy_task.generate(1, kind="dictation")

    def test_the_mixture_can_draw_it(self):
        tasks = {mixture.generate_sample("train", 5, k, weights={"copy": 0.5, "prose": 0.5}).task
                 for k in range(20)}
        self.assertEqual(tasks, {"copy", "prose"})


class FollowupTest(unittest.TestCase):
    def test_the_task_comes_after_earlier_turns_and_keeps_its_answer(self):
        finals = set()
        for seed in range(120):
            s = followup.generate(seed)
            finals.add(s.task)
            turns = [m for m in s.messages if m["role"] != "system"]
            self.assertGreaterEqual(len(turns), 4)  # at least one earlier exchange
            self.assertEqual([m["role"] for m in turns], ["user", "assistant"] * (len(turns) // 2))
            self.assertLessEqual(sum(m["role"] == "system" for m in s.messages), 1)
            if s.task == "arithmetic":
                a, b, op = s.meta["a"], s.meta["b"], s.meta["op"]
                self.assertEqual(s.final_answer(), str(arithmetic.solve(op, a, b)))
            if s.expected:
                self.assertTrue(score_answer(s.expected, s.final_answer(), s.match, s.distractors))
        self.assertEqual(finals, {"arithmetic", "copy", "conversation"})

    def test_arithmetic_options_reach_the_final_task(self):
        changed = 0
        for seed in range(200):
            plain = followup.generate(seed, final="arithmetic")
            columns = followup.generate(seed, final="arithmetic", arithmetic_options={"level2_columns": True})
            self.assertEqual(plain.final_answer(), columns.final_answer())
            if plain.meta.get("level") == 2 and plain.mode == "thinking":
                self.assertIn(f"answer {columns.final_answer()}", columns.final_thinking())
                changed += 1
            else:
                self.assertEqual(_digest(plain), _digest(columns))
        self.assertGreater(changed, 10)

    def test_an_eval_chooses_mode_and_effort_and_the_draws_stay(self):
        """Given mode and effort (make_eval's later sums) replace the drawn ones; the sample's other
        draws are the same, so where the drawn ones were those, it is the same sample."""
        for seed in range(60):
            drawn = followup.generate(seed, final="arithmetic")
            chosen = followup.generate(seed, final="arithmetic", mode="thinking", effort=75)
            self.assertEqual((chosen.mode, chosen.effort), ("thinking", 75))
            self.assertEqual(chosen.messages[-2]["content"], drawn.messages[-2]["content"])
            self.assertEqual(chosen.final_answer(), drawn.final_answer())
            again = followup.generate(seed, final="arithmetic", mode=drawn.mode, effort=drawn.effort)
            self.assertEqual(_digest(again), _digest(drawn))
        chat = followup.generate(7, final="arithmetic", mode="chat", effort=75)
        self.assertEqual((chat.mode, chat.effort), ("chat", None))

    def test_same_seed_same_sample(self):
        self.assertEqual(_digest(followup.generate(3)), _digest(followup.generate(3)))
        self.assertNotEqual(_digest(followup.generate(3)), _digest(followup.generate(4)))
        self.assertEqual(followup.generate(5, final="copy").task, "copy")


if __name__ == "__main__":
    unittest.main()
