"""Facts told and asked for in other sentences (recall.generate's told_share and asked_share,
issue 21): the training side of what the development cells of tools/demo/dev_free_recall.py
measure. Training told each fact in one or two sentences of its kind ("My name is Ana.", "I'm
Ana.") and the 2324-step model, told "People usually call me Ana." instead, thinks "The user told me
earlier: I work in Oslo." and answers that (docs/demo-eval.md, "Development cells for recall in
free wordings").

Sentences by the fact's kind (`kind_and_word`); {v} is the value and {w} the kind's word (the
category, number, code, animal, relative or event). Every filled sentence differs from every
development one (tests/tools/demo_recall_tellings_test.py).
"""

from demo import wordings

TOLD = {
    "name": ("Everyone calls me {v}.", "{v} is my name.", "I go by {v}.", "My friends know me as {v}.",
             "The name is {v}, by the way."),
    "fav": ("{v} is my favourite {w}.", "If I had to pick one {w}, it would be {v}.", "My top {w} is {v}.",
            "I like {v} best of all the {w}s.", "No {w} beats {v} for me."),
    "number": ("{v} is my {w}.", "Write down my {w}: {v}.", "My {w}? It's {v}.", "For the record, my {w} is {v}.",
               "I have {v} as my {w}."),
    "code": ("The {w} I got is {v}.", "Keep this {w} for me: {v}.", "{v} is the {w}.", "I was given {v} as the {w}.",
             "Store the {w} {v}, please."),
    "place:I live in": ("I'm living in {v} these days.", "{v} is where I live.", "I've settled in {v}.",
                        "These days I call {v} home."),
    "place:I was born in": ("{v} is the city where I was born.", "I come from {v} originally.",
                            "I was born and raised in {v}.", "My life started in {v}."),
    "place:I work in": ("My job is in {v}.", "I commute to {v} for work.", "{v} is where I work.",
                        "For work I go to {v} every day."),
    "place:Next month I am travelling to": ("I'm off to {v} next month.", "Next month's trip takes me to {v}.",
                                            "{v} is where I'm going next month.", "I fly to {v} next month."),
    "pet": ("My {w}'s name is {v}.", "I named my {w} {v}.", "We call our {w} {v}.", "{v} is what I call my {w}."),
    "rel": ("My {w} goes by {v}.", "I have a {w} named {v}.", "{v}? That's my {w}.", "The name of my {w} is {v}."),
    "time": ("My {w} begins at {v}.", "I've got the {w} at {v}.", "The {w} is set for {v}.", "At {v} I have my {w}."),
}
ASKED = {
    "name": ("What do people call me?", "Who did I say I am?", "Which name did I give you?", "What name do I go by?"),
    "fav": ("What's my top {w}?", "Which {w} do I like best?", "Name my favourite {w}.",
            "What {w} did I pick as my favourite?"),
    "number": ("What number did I give as my {w}?", "Which {w} did I mention?", "My {w}, what was it?",
               "Give me back my {w}."),
    "code": ("What {w} did I mention?", "Read me the {w} back.", "Which {w} did I tell you?",
             "The {w}: what was it again?"),
    "place:I live in": ("Which city do I live in?", "Where's my home?", "What city did I say I live in?"),
    "place:I was born in": ("Which city was I born in?", "Where do I come from?", "In what city was I born?"),
    "place:I work in": ("Which city do I work in?", "Where's my job?", "What city did I say I work in?"),
    "place:Next month I am travelling to": ("Which country am I going to next month?", "Where's my trip next month?",
                                            "What country did I say I'm visiting next month?"),
    "pet": ("What name did I give my {w}?", "Which name does my {w} have?", "What's my {w} called again?"),
    "rel": ("Which person is my {w}?", "What's the name of my {w}?", "Who did I say my {w} is?"),
    "time": ("At what time does my {w} begin?", "When's the {w}?", "What time did I give for the {w}?"),
}


def kind_and_word(key, answer):
    """(the TOLD / ASKED key, the kind's word) of a fact: recall.Fact.key and its answer as said
    ("Your dog is called Rex.": the animal is the answer's second word)."""
    if key == "name" or key.startswith("place:"):
        return key, ""
    if key.startswith("fav_"):
        return "fav", key[4:]
    if key == "pet":
        return "pet", answer.split()[1]
    if key.startswith("rel_"):
        return "rel", key[4:]
    if key.startswith("time_"):
        return "time", key[5:]
    return ("number" if key.endswith("number") else "code"), key


def told(rng, fact):
    """The fact stated in one of TOLD's sentences of its kind (a value that starts it, such as
    "tulip", capitalised)."""
    kind, word = kind_and_word(fact.key, fact.answer)
    text = rng.choice(TOLD[kind]).format(v=fact.value, w=word)
    return text[0].upper() + text[1:]


def asked(rng, fact):
    """The fact asked for in one of ASKED's sentences of its kind, sometimes typed casually."""
    kind, word = kind_and_word(fact.key, fact.answer)
    return wordings.vary(rng, rng.choice(ASKED[kind])).format(w=word)
