"""Recall: facts stated early in a chat, asked for after a controlled number of tokens of other turns.

The distance (tokens from the end of the fact's last mention to the first generated answer token)
is steered by the filler between fact and question: small talk, arithmetic, prose passages.
Pass count_tokens (e.g. len(tokenizer.encode(text))) for exact steering; without it a
characters-per-token estimate is used. measure_distance() gives the exact figure after rendering.
Answers are short sentences holding the value once, scored with sample.score_answer.
"""

from demo import arithmetic, chat_format, conversation, prose, recall_tellings, wording_grammar, wordings
from demo.lexicon import CITIES, COUNTRIES, FAVOURITES, FIRST_NAMES, PET_NAMES
from demo.rng import Rng, derive_seed
from demo.sample import Sample

EVAL_DISTANCES = (200, 500, 1000, 2000, 4000)
TURN_OVERHEAD = 4  # <｜User｜>, <｜Assistant｜>, </think>, EOS around each exchange


class Fact:
    """One fact: its key (unique within a chat), value, how it is said, asked and answered."""

    def __init__(self, key, value, statements, questions, answer, echo, pool, varied=()):
        self.key, self.value = key, value
        self.statements, self.questions, self.answer, self.echo = statements, questions, answer, echo
        self.pool = pool  # other values of the same kind (for distractors and absent-fact questions)
        self.varied = varied  # more everyday ways to ask (generate's varied_share), answered the same


def _code(rng):
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return "".join(rng.choice(letters) if rng.chance(0.5) else str(rng.below(10)) for _ in range(rng.randint(4, 6)))


# The varied wordings of the place facts' questions, by the statement's verb.
PLACE_QUESTIONS = {
    "I live in": ["Which city do I live in?", "Tell me where I live.", "Where did I say I live?",
                  "Do you know where I live?"],
    "I was born in": ["Which city was I born in?", "Tell me where I was born.", "Where did I say I was born?",
                      "Do you know where I was born?"],
    "I work in": ["Which city do I work in?", "Tell me where I work.", "Where did I say I work?",
                  "Do you know where I work?"],
    "Next month I am travelling to": ["Which country am I travelling to next month?",
                                      "Tell me where I'm going next month.",
                                      "Where did I say I'm travelling next month?",
                                      "Do you know where I'm going next month?"],
}


def make_fact(rng, kind):
    if kind == "name":
        v = rng.choice(FIRST_NAMES)
        return Fact("name", v, ["My name is {v}.", "I'm {v}.", "Call me {v}.", "You can call me {v}."],
                    ["What is my name?", "Do you remember my name?", "What did I say my name was?"],
                    "Your name is {v}.", "Nice to meet you, {v}.", FIRST_NAMES,
                    ["What's my name?", "Tell me my name.", "Do you know what I'm called?", "What was my name again?",
                     "Can you repeat my name?", "What did I tell you my name is?", "Say my name, please."])
    if kind == "favourite":
        cat = rng.choice(sorted(FAVOURITES))
        pool = FAVOURITES[cat]
        v = rng.choice(pool)
        return Fact("fav_" + cat, v, [f"My favourite {cat} is {{v}}.", f"I really like {{v}}; it's my favourite {cat}."],
                    [f"What is my favourite {cat}?", f"Which {cat} did I say was my favourite?",
                     f"Do you remember my favourite {cat}?"], f"Your favourite {cat} is {{v}}.",
                    f"Noted: your favourite {cat} is {{v}}.", pool,
                    [f"What's my favourite {cat}?", f"Tell me my favourite {cat}.", f"Which {cat} is my favourite?",
                     f"Do you recall my favourite {cat}?", f"My favourite {cat} was what again?",
                     f"Can you repeat my favourite {cat}?", f"What did I say about my favourite {cat}?"])
    if kind == "number":
        what, lo, hi = rng.choice([("locker number", 100, 9999), ("room number", 100, 999), ("lucky number", 1, 99),
                                   ("house number", 1, 300), ("bus number", 1, 199), ("seat number", 1, 80),
                                   ("order number", 10000, 99999), ("table number", 1, 40)])
        v = str(rng.randint(lo, hi))
        pool = [str(rng.randint(lo, hi)) for _ in range(8)]
        return Fact(what, v, [f"My {what} is {{v}}.", f"Remember that my {what} is {{v}}."],
                    [f"What is my {what}?", f"What was my {what}?", f"Do you remember my {what}?"],
                    f"Your {what} is {{v}}.", f"Got it, {what} {{v}}.", pool,
                    [f"What's my {what}?", f"Tell me my {what}.", f"Do you recall my {what}?",
                     f"My {what} was what again?", f"Can you repeat my {what}?", f"I forgot my {what}. What is it?"])
    if kind == "code":
        what = rng.choice(["access code", "booking reference", "parcel code", "gate code", "ticket code"])
        v = _code(rng)
        return Fact(what, v, [f"The {what} is {{v}}.", f"Please remember the {what}: {{v}}."],
                    [f"What is the {what}?", f"What was the {what}?", f"Can you tell me the {what} again?"],
                    f"The {what} is {{v}}.", f"OK, the {what} is {{v}}.", [_code(rng) for _ in range(8)],
                    [f"What's the {what}?", f"Tell me the {what}.", f"Do you recall the {what}?",
                     f"The {what} was what again?", f"Can you repeat the {what}?", f"I forgot the {what}. What is it?"])
    if kind == "place":
        verb, q, a, pool = rng.choice([("I live in", "Where do I live?", "You live in", CITIES),
                                       ("I was born in", "Where was I born?", "You were born in", CITIES),
                                       ("I work in", "Where do I work?", "You work in", CITIES),
                                       ("Next month I am travelling to", "Where am I travelling to next month?",
                                        "You are travelling to", COUNTRIES)])
        v = rng.choice(pool)
        return Fact("place:" + verb, v, [f"{verb} {{v}}."], [q], f"{a} {{v}}.", f"{verb} {{v}}, noted.".replace(
            "I ", "you ").capitalize(), pool, PLACE_QUESTIONS[verb])
    if kind == "pet":
        animal = rng.choice(["dog", "cat", "rabbit", "parrot", "hamster", "tortoise"])
        v = rng.choice(PET_NAMES)
        return Fact("pet", v, [f"My {animal} is called {{v}}.", f"I have a {animal} named {{v}}."],
                    [f"What is my {animal} called?", f"What is the name of my {animal}?"],
                    f"Your {animal} is called {{v}}.", f"{{v}} is a lovely name for a {animal}.", PET_NAMES,
                    [f"What's my {animal}'s name?", f"Tell me my {animal}'s name.",
                     f"What did I say my {animal} is called?", f"Do you recall what my {animal} is called?",
                     f"My {animal}'s name was what again?"])
    if kind == "relative":
        rel = rng.choice(["sister", "brother", "friend", "teacher", "neighbour", "cousin", "boss"])
        v = rng.choice(FIRST_NAMES)
        return Fact("rel_" + rel, v, [f"My {rel} is called {{v}}.", f"My {rel}'s name is {{v}}."],
                    [f"What is my {rel}'s name?", f"What is my {rel} called?"], f"Your {rel} is called {{v}}.",
                    f"Your {rel} is {{v}}, got it.", FIRST_NAMES,
                    [f"What's my {rel}'s name?", f"Tell me my {rel}'s name.", f"What did I say my {rel} is called?",
                     f"Do you recall my {rel}'s name?", f"My {rel}'s name was what again?", f"Who is my {rel}?"])
    event = rng.choice(["meeting", "dentist appointment", "train", "class", "dinner", "flight"])
    v = f"{rng.randint(1, 12)}:{rng.below(12) * 5:02d}"
    return Fact("time_" + event, v, [f"My {event} is at {{v}}.", f"I have a {event} at {{v}}."],
                [f"When is my {event}?", f"What time is my {event}?"], f"Your {event} is at {{v}}.",
                f"OK, {event} at {{v}}.", [f"{h}:{m:02d}" for h in range(1, 13) for m in (0, 15, 30, 45)],
                [f"What time's my {event}?", f"Tell me when my {event} is.", f"At what time is my {event}?",
                 f"When did I say my {event} was?", f"Do you recall the time of my {event}?",
                 f"My {event} is at what time again?"])


_PLACE_PHRASES = {"I live in": "the city I live in", "I was born in": "the city I was born in",
                  "I work in": "the city I work in", "Next month I am travelling to": "the country I am travelling to"}


def noun_phrase(fact):
    """What a fact is asked for by in wording_grammar's recall frames: "my name", "my favourite
    flower", "the access code", "my dog's name", "the time of my meeting", "the city I live in"."""
    key = fact.key
    if key == "name":
        return "my name"
    if key.startswith("fav_"):
        return f"my favourite {key[4:]}"
    if key.startswith("place:"):
        return _PLACE_PHRASES[key[len("place:"):]]
    if key == "pet":
        return f"my {fact.answer.split()[1]}'s name"  # "Your dog is called {v}."
    if key.startswith("rel_"):
        return f"my {key[4:]}'s name"
    if key.startswith("time_"):
        return f"the time of my {key[5:]}"
    return f"my {key}" if key.endswith("number") else f"the {key}"


FACT_KINDS = (("name", 1.0), ("favourite", 2.5), ("number", 1.5), ("code", 1.0), ("place", 1.2), ("pet", 0.8),
              ("relative", 1.0), ("time", 0.8))
ACKS = ("Got it.", "I'll remember that.", "OK, noted.", "Thanks, I will keep that in mind.", "Understood.")
QUESTION_PREFIXES = ("", "", "", "By the way, ", "Quick question: ", "Earlier I told you something. ", "Now, ")


def _approx_tokens(text):
    return max(1, len(text) * 10 // 42)


def _fill_exchange(rng, budget, count):
    """One filler (user, assistant) pair costing at most about budget tokens, or None if none fits."""
    for _ in range(6):
        kind = rng.weighted([("prose", 0.45), ("chat", 0.3), ("arith", 0.25)])
        if kind == "prose":
            user, reply = prose.exchange(rng)
        elif kind == "chat":
            _, user, reply, _ = conversation.exchange(rng, 1)
        else:
            op, a, b = arithmetic.sample_problem(rng)
            user, reply = rng.choice(arithmetic.QUESTION_TEMPLATES[op]).format(a=a, b=b), str(arithmetic.solve(op, a, b))
        if count(user) + count(reply) + TURN_OVERHEAD <= budget:
            return user, reply
    if budget < 24:
        return None
    words, text = prose.random_passage(rng).split(), ""
    while words and count(text + " " + words[0]) + 8 + TURN_OVERHEAD <= budget:
        text = (text + " " + words.pop(0)).strip()
    return (f"Here is a note: {text}", "Noted.") if text else None


def generate(seed, distance=None, effort=None, mode=None, count_tokens=None, max_tokens=4096, n_facts=None,
             final_only=False, extra_questions=0.0, max_facts=3, varied_share=0.0, grammar_share=0.0,
             wording_split="training", told_share=0.0, asked_share=0.0):
    """A recall chat: 1-3 facts, filler of about `distance` tokens, then a question on one fact.

    final_only=True (eval) asks only the final question; training samples may also ask about other
    facts midway, or about a fact never given (answered "you have not told me").
    extra_questions (training only): the chance that each other fact is also asked for right before
    the final question, at about the same distance. More answers that need the far-back fact per
    sample token; 0 keeps the stream of earlier runs unchanged.
    max_facts: facts per chat are 1-3 (weights 0.4 / 0.35 / 0.25) by default, else uniform over
    1..max_facts; with extra_questions, more facts mean more far-back answers per sample.
    varied_share: the share of the final question and of extra_questions' asked in a fact's
    `varied` wordings (`_worded`), from a stream of its own (0 keeps earlier samples); the answer
    is the same. The 1644-step model finds a fact asked for in other words one time in six
    (docs/demo-eval.md).
    grammar_share: the share of those questions (after varied_share's) worded from
    wording_grammar's recall frames, half `wording_split` ("training", or "dev": the development
    set's `recall wording` cells), from a stream of its own.
    told_share: the share of facts stated in a sentence of recall_tellings.TOLD instead of the
    fact's own; asked_share: the share of the questions above (after grammar_share's) asked in one
    of recall_tellings.ASKED. Each from a stream of its own; the thinking quotes the fact as told.
    """
    wording_grammar.check_split("recall.generate", wording_split)
    rng = Rng(seed)
    count = count_tokens or _approx_tokens
    mode = mode or ("thinking" if rng.chance(0.6) else "chat")
    effort = (effort if effort is not None else rng.randint(1, 100)) if mode == "thinking" else None
    distance = distance or rng.log_uniform_int(20, 4000)
    counts = [(1, 0.4), (2, 0.35), (3, 0.25)] if max_facts == 3 else [(k, 1.0) for k in range(1, max_facts + 1)]
    facts = _distinct_facts(rng, n_facts or rng.weighted(counts))
    messages = []
    if rng.chance(0.3):
        messages.append({"role": "system", "content": rng.choice(conversation.SYSTEM_PROMPTS)})
    mentions = {f.key: [] for f in facts}
    told = (Rng(derive_seed("recall-told", seed)), told_share) if told_share else None
    _state_facts(rng, facts, messages, mentions, told)
    target = facts[rng.below(len(facts))]
    wording = Rng(derive_seed("recall-wording", seed)) if varied_share else None
    prefix = rng.choice(QUESTION_PREFIXES)
    question = prefix + _worded(rng.choice(target.questions), target, wording, varied_share)
    grammar = (Rng(derive_seed("recall-grammar", seed)), grammar_share, wording_split) if grammar_share else None
    question = _grammar_worded(question, prefix, target, grammar)
    asking = (Rng(derive_seed("recall-asked", seed)), asked_share) if asked_share else None
    question = _asked(question, prefix, target, asking)
    answer = target.answer.format(v=target.value)
    budget = min(distance, max_tokens - 120 - sum(count(_text(m)) for m in messages)) - count(question) - TURN_OVERHEAD
    _add_filler(rng, messages, facts, target, budget, count, final_only)
    if extra_questions > 0 and not final_only:
        _ask_other_facts(rng, messages, facts, target, extra_questions, wording, varied_share, grammar, asking)
    thinking = ""
    if mode == "thinking" and effort >= 61:
        thinking = f"The user told me earlier: {mentions[target.key][0]}"
    messages += [{"role": "user", "content": question},
                 {"role": "assistant", "content": answer, "thinking": thinking}]
    distractors = sorted({f.value for f in facts if f.key != target.key and f.value != target.value} |
                         {v for v in target.pool[:6] if v != target.value})
    meta = {"fact_key": target.key, "distance_target": distance, "mentions": mentions[target.key],
            "n_facts": len(facts)}
    return Sample("recall", messages, mode, effort, expected=target.value, distractors=distractors, meta=meta)


def _text(message):
    return chat_format._user_text(message) if message["role"] == "user" else chat_format._text_of(message)


def _distinct_facts(rng, n):
    facts, keys = [], set()
    while len(facts) < n:
        f = make_fact(rng, rng.weighted(FACT_KINDS))
        if f.key not in keys and all(f.value != g.value for g in facts):
            facts.append(f)
            keys.add(f.key)
    return facts


def _state_facts(rng, facts, messages, mentions, told=None):
    """Facts told in one or two user turns, each acknowledged (sometimes echoing the value); told:
    (its Rng, share) of facts told in recall_tellings' sentences instead, None when off."""
    groups = [facts] if len(facts) == 1 or rng.chance(0.5) else [facts[:1], facts[1:]]
    for group in groups:
        said = [rng.choice(f.statements).format(v=f.value) for f in group]
        if told is not None:
            stream, share = told
            said = [recall_tellings.told(stream, f) if stream.chance(share) else s for f, s in zip(group, said)]
        for f, s in zip(group, said):
            mentions[f.key].append(s)
        opener = rng.choice(["", "", "Hi! ", "Hello. ", "Before we start: ", "Some things about me. "])
        echo = rng.chance(0.4)
        if echo:
            reply = " ".join(f.echo.format(v=f.value) for f in group)
            for f in group:
                mentions[f.key].append(f.echo.format(v=f.value))
        else:
            reply = rng.choice(ACKS)
        messages.append({"role": "user", "content": opener + " ".join(said)})
        messages.append({"role": "assistant", "content": reply, "thinking": ""})


def _add_filler(rng, messages, facts, target, budget, count, final_only):
    others = [f for f in facts if f.key != target.key]
    while budget > 12:
        roll = rng.random()
        if not final_only and others and roll < 0.06:
            f = rng.choice(others)  # an intermediate question about another fact
            user, reply = rng.choice(f.questions), f.answer.format(v=f.value)
        elif not final_only and roll < 0.09:
            absent = make_fact(rng, rng.weighted(FACT_KINDS))
            if any(absent.key == f.key for f in facts):
                continue
            user = rng.choice(absent.questions)
            reply = rng.choice(["You haven't told me that yet.", "I don't know; you have not told me."])
        else:
            pair = _fill_exchange(rng, budget, count)
            if pair is None:
                break
            user, reply = pair
        budget -= count(user) + count(reply) + TURN_OVERHEAD
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": reply, "thinking": ""}]


def _worded(question, fact, wording, share):
    """question, or with probability share (drawn from the Rng `wording`, None when off) one of the
    fact's varied wordings, sometimes typed casually."""
    if wording is None or not wording.chance(share):
        return question
    return wordings.vary(wording, wording.choice(fact.varied))


def _grammar_worded(question, prefix, fact, grammar):
    """question, or with probability share (grammar = (its Rng, share, half), None when off) the
    prefix and a wording of wording_grammar's recall frames about the fact, sometimes typed casually."""
    if grammar is None:
        return question
    stream, share, split = grammar
    if not stream.chance(share):
        return question
    template = stream.choice(wording_grammar.wordings_of("recall", split))
    return prefix + wordings.vary(stream, template.format(np=noun_phrase(fact)))


def _asked(question, prefix, fact, asking):
    """question, or with probability share (asking = (its Rng, share), None when off) the prefix and
    one of recall_tellings' questions about the fact."""
    if asking is None or not asking[0].chance(asking[1]):
        return question
    return prefix + recall_tellings.asked(asking[0], fact)


def _ask_other_facts(rng, messages, facts, target, chance, wording=None, varied_share=0.0, grammar=None, asking=None):
    """Questions on the facts other than `target`, each with probability `chance`, in random order.
    Their thinking is empty: the chat template drops earlier turns' reasoning anyway."""
    others = [f for f in facts if f.key != target.key]
    rng.shuffle(others)
    for f in others:
        if rng.chance(chance):
            prefix = rng.choice(QUESTION_PREFIXES)
            question = prefix + _worded(rng.choice(f.questions), f, wording, varied_share)
            question = _grammar_worded(question, prefix, f, grammar)
            question = _asked(question, prefix, f, asking)
            messages += [{"role": "user", "content": question},
                         {"role": "assistant", "content": f.answer.format(v=f.value), "thinking": ""}]


def measure_distance(sample, tokenizer):
    """Tokens from the end of the asked fact's last mention to the first generated answer token."""
    segs = chat_format.render_segments(sample.prompt_messages(), sample.mode, sample.effort, add_generation_prompt=True)
    text = "".join(t for t, _ in segs)
    ids = tokenizer.encode(text)
    ends, pos = [], 0
    for i in ids:
        pos += len(tokenizer.decode_bytes([i]))
        ends.append(pos)
    raw = text.encode("utf-8")
    last_end = max(raw.rfind(m.encode("utf-8")) + len(m.encode("utf-8")) for m in sample.meta["mentions"])
    token_index = next(k for k, e in enumerate(ends) if e >= last_end)
    return len(ids) - 1 - token_index
