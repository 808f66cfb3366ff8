"""Arithmetic with reasoning effort: multi-digit +, -, x whose thinking grows with the effort.

Thinking levels (a monotone step function of effort; each level's text extends the one before):
  effort  1-20  level 0: no thinking
  effort 21-40  level 1: the problem restated
  effort 41-60  level 2: + a plan and both operands written least-significant digit first
  effort 61-85  level 3: + column-by-column work, one column per line
  effort 86-100 level 4: + a verification (the inverse operation worked the same way)
The column lines are built for a small transformer: every line starts by copying the previous
line's remaining digits minus the one just used (so the next digits are always at a fixed place
in the line above), carries/borrows are written explicitly, and the running result is
accumulated most-significant digit first, so the last line already holds the answer.

level2_columns (an option, off by default so earlier samples stay the same): level 2 writes the
column lines instead of the plan and the reversed operands, and level 3 adds those two lines.
Why: the plan alone does not help the answer, and the first trained model answered 4-digit
additions right 45% of the time at effort 25 but never at effort 50 (docs/demo-eval.md); with the
columns at level 2 the thinking still grows with the effort and no level is worse than the one
below it.
"""

from demo import arith_stories, chat_format, wording_grammar, wordings
from demo.rng import Rng, derive_seed
from demo.sample import Sample

LEVEL_BOUNDS = (20, 40, 60, 85)  # highest effort of levels 0..3; level 4 above
OPS = {"add": "+", "sub": "-", "mul": "*"}


def thinking_level(effort):
    for level, bound in enumerate(LEVEL_BOUNDS):
        if effort <= bound:
            return level
    return len(LEVEL_BOUNDS)


def _rev(n, width):
    return str(n)[::-1].ljust(width, "0")


def add_lines(a, b):
    """Column addition lines of a + b (least-significant column first) and the sum."""
    width = max(len(str(a)), len(str(b)))
    ra, rb = _rev(a, width), _rev(b, width)
    lines = [f"reverse: {ra} {rb}"]
    carry, acc = 0, ""
    for k in range(width):
        x, y = int(ra[k]), int(rb[k])
        s = x + y + carry
        acc = str(s % 10) + acc
        lines.append(f"{ra[k:]} {rb[k:]} c{carry}: {x}+{y}+{carry}={s}, digit {s % 10}, acc {acc}")
        carry = s // 10
    if carry:
        acc = str(carry) + acc
    lines.append(f"carry {carry}, result {int(acc)}")
    return lines, int(acc)


def sub_lines(a, b):
    """Column subtraction lines of a - b for a >= b, with borrows, and the difference."""
    width = len(str(a))
    ra, rb = _rev(a, width), _rev(b, width)
    lines = [f"reverse: {ra} {rb}"]
    borrow, acc = 0, ""
    for k in range(width):
        x, y = int(ra[k]), int(rb[k])
        d = x - y - borrow
        if d >= 0:
            work, nxt = f"{x}-{y}-{borrow}={d}", 0
        else:
            d += 10
            work, nxt = f"{x}-{y}-{borrow}<0, {x + 10}-{y}-{borrow}={d}", 1
        acc = str(d) + acc
        lines.append(f"{ra[k:]} {rb[k:]} b{borrow}: {work}, digit {d}, acc {acc}")
        borrow = nxt
    lines.append(f"acc {acc}, result {int(acc)}")
    return lines, int(acc)


def partial_lines(a, digit):
    """Lines of a * digit (digit 0..9), least-significant first, and the product."""
    ra = str(a)[::-1]
    lines, carry, acc = [], 0, ""
    for k in range(len(ra)):
        x = int(ra[k])
        p = x * digit + carry
        acc = str(p % 10) + acc
        lines.append(f"{ra[k:]} x{digit} c{carry}: {x}*{digit}+{carry}={p}, digit {p % 10}, acc {acc}")
        carry = p // 10
    if carry:
        acc = str(carry) + acc
    lines.append(f"carry {carry}, partial {int(acc)}")
    return lines, int(acc)


def mul_lines(a, b):
    """Long multiplication: one partial product per digit of b, then running column additions."""
    lines = [f"reverse a: {str(a)[::-1]}", f"digits of b from the right: {' '.join(str(b)[::-1])}"]
    total = None
    for j, ch in enumerate(str(b)[::-1]):
        lines.append(f"times {ch}, shift {j}:")
        plines, p = partial_lines(a, int(ch))
        lines.extend(plines)
        shifted = p * 10**j
        if j:
            lines.append(f"shifted {shifted}")
        if total is None:
            total = shifted
            continue
        lines.append(f"add {total}+{shifted}:")
        alines, total = add_lines(total, shifted)
        lines.extend(alines)
    lines.append(f"product {total}")
    return lines, total


def _digit_root_line(n):
    """Casting out nines for one number: 'n -> d+d+...=s -> ... -> r'."""
    steps, cur = [str(n)], n
    while cur >= 10:
        digits = str(cur)
        cur = sum(int(c) for c in digits)
        steps.append(f"{'+'.join(digits)}={cur}")
    return " -> ".join(steps), cur


def verify_lines(op, a, b, result):
    """The check written at the highest level: the inverse operation, or casting out nines."""
    if op == "add":
        lines, back = sub_lines(result, b)
        return [f"check: {result}-{b} should be {a}"] + lines + [f"{back} = {a}, ok"]
    if op == "sub":
        lines, back = add_lines(result, b)
        return [f"check: {result}+{b} should be {a}"] + lines + [f"{back} = {a}, ok"]
    la, ra = _digit_root_line(a)
    lb, rb = _digit_root_line(b)
    lp, rp = _digit_root_line(ra * rb)
    lr, rr = _digit_root_line(result)
    return ["check by nines:", f"a: {la}", f"b: {lb}", f"{ra}*{rb}: {lp}", f"result: {lr}",
            f"{rp} = {rr}, ok"]


def solve(op, a, b):
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    return a * b


def work_lines(op, a, b):
    return {"add": add_lines, "sub": sub_lines, "mul": mul_lines}[op](a, b)


def thinking_text(op, a, b, effort, level2_columns=False):
    """The reasoning before </think> for effort 1..100 (empty at the lowest level)."""
    level = thinking_level(effort)
    sym = OPS[op]
    if level == 0:
        return ""
    lines = [f"{a}{sym}{b}"]
    if level2_columns and level == 2:
        body, result = work_lines(op, a, b)
        return "\n".join(lines + body + [f"answer {result}"])
    if level >= 2:
        plan = {"add": "add column by column from the ones digit, carrying tens",
                "sub": "subtract column by column from the ones digit, borrowing when needed",
                "mul": "multiply by each digit of the second number, then add the shifted partials"}[op]
        lines.append(f"plan: {plan}")
    if level == 2:
        width = max(len(str(a)), len(str(b)))
        lines.append(f"reverse: {_rev(a, width)} {_rev(b, width)}")
    if level >= 3:
        body, result = work_lines(op, a, b)
        lines.extend(body)
        if level >= 4:
            lines.extend(verify_lines(op, a, b, result))
        lines.append(f"answer {result}")
    return "\n".join(lines)


QUESTION_TEMPLATES = {
    "add": ["What is {a} + {b}?", "What is {a} plus {b}?", "Compute {a} + {b}.", "{a} + {b} = ?",
            "Please add {a} and {b}.", "Add {a} and {b}.", "What do you get if you add {a} and {b}?",
            "Can you work out {a} + {b}?", "Sum of {a} and {b}?", "{a}+{b}", "How much is {a} plus {b}?"],
    "sub": ["What is {a} - {b}?", "What is {a} minus {b}?", "Compute {a} - {b}.", "{a} - {b} = ?",
            "Subtract {b} from {a}.", "What do you get if you take {b} away from {a}?",
            "Can you work out {a} - {b}?", "{a}-{b}", "How much is {a} minus {b}?"],
    "mul": ["What is {a} * {b}?", "What is {a} times {b}?", "Compute {a} x {b}.", "{a} * {b} = ?",
            "Multiply {a} by {b}.", "What is the product of {a} and {b}?", "Can you work out {a} * {b}?",
            "{a}*{b}", "How much is {a} times {b}?"],
}

# More everyday wordings (varied_share; our own, not the sealed test set's, tests/tools/demo_wordings_test.py).
VARIED_TEMPLATES = {
    "add": ["Add up {a} and {b}.", "What's {a} plus {b}?", "Calculate {a} + {b}.", "{a} plus {b} equals what?",
            "Work out {a} + {b} for me.", "How much do {a} and {b} come to?", "Sum up {a} and {b}.",
            "Tell me what {a} + {b} is.", "{a} + {b} is how much?", "Please work out {a} plus {b}.",
            "Add {b} to {a}.", "Can you add {a} and {b} for me?"],
    "sub": ["Take {b} from {a}.", "What's {a} minus {b}?", "Calculate {a} - {b}.", "{a} minus {b} equals what?",
            "Work out {a} - {b} for me.", "How much is left if you take {b} from {a}?",
            "What remains when {b} is subtracted from {a}?", "Tell me what {a} - {b} is.", "{a} - {b} is how much?",
            "Please work out {a} minus {b}.", "{a} take away {b}?", "Can you subtract {b} from {a} for me?"],
    "mul": ["What's {a} times {b}?", "Calculate {a} x {b}.", "{a} times {b} equals what?", "Work out {a} * {b} for me.",
            "What do {a} and {b} multiply to?", "Tell me what {a} * {b} is.", "{a} x {b} is how much?",
            "Please work out {a} times {b}.", "Can you multiply {a} by {b} for me?"],
}
LEAD_INS = ("Quick one: ", "Maths question: ", "Hey, ", "Next: ")

DEFAULT_DIGITS = {"add": (1, 5, 1, 5), "sub": (1, 5, 1, 5), "mul": (1, 4, 1, 2)}  # a lo/hi, b lo/hi


def random_operand(rng, lo_digits, hi_digits):
    n = rng.randint(lo_digits, hi_digits)
    return rng.randint(10 ** (n - 1) if n > 1 else 0, 10**n - 1)


def sample_problem(rng, op=None, digits=None):
    op = op or rng.weighted([("add", 0.4), ("sub", 0.3), ("mul", 0.3)])
    a_lo, a_hi, b_lo, b_hi = digits or DEFAULT_DIGITS[op]
    a, b = random_operand(rng, a_lo, a_hi), random_operand(rng, b_lo, b_hi)
    if op == "sub" and a < b:
        a, b = b, a
    return op, a, b


def varied_question(rng, op, a, b):
    """The problem in one of VARIED_TEMPLATES, sometimes typed casually or after a lead-in."""
    return wordings.vary(rng, rng.choice(VARIED_TEMPLATES[op]), LEAD_INS).format(a=a, b=b)


def grammar_question(rng, op, a, b, split="training"):
    """The problem in a wording of wording_grammar's `split` half ("training" or "dev"), typed as
    `wordings.vary` types it."""
    return wordings.vary(rng, rng.choice(wording_grammar.wordings_of(op, split)), LEAD_INS).format(a=a, b=b)


def generate(seed, effort=None, mode=None, op=None, digits=None, level2_columns=False, varied_share=0.0,
             grammar_share=0.0, wording_split="training", story_share=0.0):
    """One arithmetic sample; effort/mode/op/digits are drawn from the seed unless given.

    varied_share (off by default, so earlier samples stay the same): the share of questions asked
    in VARIED_TEMPLATES instead of QUESTION_TEMPLATES, drawn from a stream of its own; answer and
    thinking are unchanged. The 1644-step model adds 4-digit numbers asked in new wordings right
    20-35% of the time against 95-100% in the training ones (docs/demo-eval.md).
    grammar_share: the share of questions (after varied_share's) worded from wording_grammar's half
    `wording_split` ("training", or "dev": the development set's `wording_add` / `wording_sub`
    cells), from a stream of its own.
    story_share: the share of addition and subtraction questions (after grammar_share's) asked as
    an everyday sentence or word problem of arith_stories.STORIES, from a stream of its own."""
    wording_grammar.check_split("arithmetic.generate", wording_split)
    rng = Rng(seed)
    op, a, b = sample_problem(rng, op, digits)
    mode = mode or ("thinking" if rng.chance(0.85) else "chat")
    if mode == "thinking":
        effort = effort if effort is not None else rng.randint(1, 100)
    else:
        effort = None
    question = rng.choice(QUESTION_TEMPLATES[op]).format(a=a, b=b)
    if varied_share:
        wording = Rng(derive_seed("arithmetic-wording", seed))  # the main stream stays as it was
        if wording.chance(varied_share):
            question = varied_question(wording, op, a, b)
    if grammar_share:
        grammar = Rng(derive_seed("arithmetic-grammar", seed))  # the other streams stay as they were
        if grammar.chance(grammar_share):
            question = grammar_question(grammar, op, a, b, wording_split)
    if story_share and op in arith_stories.STORIES:
        story = Rng(derive_seed("arithmetic-story", seed))  # the other streams stay as they were
        if story.chance(story_share):
            question = arith_stories.story_question(story, op, a, b)
    result = solve(op, a, b)
    answer = {"role": "assistant", "content": str(result)}
    if mode == "thinking":
        answer["thinking"] = thinking_text(op, a, b, effort, level2_columns)
    messages = [{"role": "user", "content": question}, answer]
    meta = {"op": op, "a": a, "b": b, "digits": max(len(str(a)), len(str(b))),
            "level": thinking_level(effort) if effort else 0}
    return Sample("arithmetic", messages, mode, effort, expected=str(result), match="exact", meta=meta)


if __name__ == "__main__":
    for eff in (10, 30, 50, 75, 100):
        print(f"--- effort {eff}")
        print(chat_format.render_text(generate(1, effort=eff, mode="thinking", op="mul").messages, "thinking", eff))
