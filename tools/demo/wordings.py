"""Wider question wordings for the training generators (issue 21): paraphrases of the picture
questions, and the casual forms (lower case, no closing mark, a lead-in) that arithmetic and
recall questions share with them.

Why: each generator asked its questions in two to four fixed wordings, and the 1644-step model
answers a picture question, a sum or a recall question asked in other everyday words mostly wrong
(the sealed test set, docs/demo-eval.md). These wordings are our own: the sealed set's phrasings
must stay unseen, and tests/tools/demo_wordings_test.py checks that none of them appears here.
Every generator draws them from a random stream of its own, behind an option that defaults to 0,
so earlier samples stay byte for byte the same.
"""

from demo import wording_grammar

# Per question kind of shapes._question / shapes._absent_question. Fields: {what} ("shapes",
# "circles", "red shapes", "red circles"), {colour}, {shape}, {name} ("red circle"). The answer
# keeps the kind's form: a count sentence, "Yes."/"No.", or "It is ..." naming one value, so a
# template asks for exactly that (a what-question is never answered yes or no).
COUNT_WORDINGS = [
    "How many {what} are shown?", "Tell me how many {what} there are.", "Count all the {what}.",
    "Please count the {what} in the image.", "How many {what} does the picture show?",
    "How many {what} are in this image?", "Count how many {what} the image has.", "How many {what} in total?",
    "Count up the {what}.", "Give me a count of the {what}.",
]
PICTURE_WORDINGS = {
    "count": COUNT_WORDINGS,  # count_all ({what} = "shapes"), count_shape, count_colour, count_both
    "exists": [
        "Can you see a {colour} {shape}?", "Is a {colour} {shape} in the picture?", "Is there any {colour} {shape}?",
        "Tell me if there is a {colour} {shape}.", "Is there a {colour} {shape} anywhere?",
        "Any {colour} {shape} in the image?", "Is one of the shapes a {colour} {shape}?",
        "Has the image got a {colour} {shape}?", "Is a {colour} {shape} shown?",
        "Look for a {colour} {shape}. Is there one?",
    ],
    "colour_of": [
        "What colour's the {shape}?", "How is the {shape} coloured?", "Look at the {shape}. What colour is it?",
        "What colour is the {shape} in the picture?", "Say what colour the {shape} is.",
        "Can you tell me what colour the {shape} is?", "The {shape}: what colour?", "What is the {shape}'s colour?",
        "Which colour was used for the {shape}?",
    ],
    "shape_of": [
        "What's the {colour} shape?", "Which shape is coloured {colour}?", "What shape is {colour}?",
        "Tell me which shape is {colour}.", "Look at the {colour} one. What shape is it?",
        "What shape does the {colour} one have?", "Can you tell me what the {colour} shape is?",
        "Identify the {colour} shape.", "Which shape is drawn in {colour}?", "The {colour} shape: what is it?",
    ],
    "position": [
        "Where's the {name}?", "Tell me where the {name} is.", "Where in this image is the {name}?",
        "Locate the {name}.", "What is the position of the {name}?", "Can you tell me where the {name} is?",
        "Where is the {name} placed?", "Whereabouts is the {name}?", "Show me where the {name} is.",
        "Where does the {name} appear?",
    ],
    "size": [
        "Is the {name} big or small?", "How large is the {name}: small or large?",
        "Tell me whether the {name} is small or large.", "What size is the {name}?",
        "Is the {name} a small one or a large one?", "What is the size of the {name}?", "The {name}: small or large?",
        "Would you say the {name} is small or large?", "Is the {name} drawn small or large?",
    ],
    "describe": [
        "Tell me what is in the picture.", "What can you see in this image?", "Describe what you see.",
        "Give me a description of the image.", "What does the picture show?", "List the shapes in the picture.",
        "What is drawn in this image?", "Describe the shapes you see.", "What's in this picture?",
    ],
}
PICTURE_LEAD_INS = ("In this picture, ", "Looking at the image, ", "Quick question: ", "About the picture: ")

CASUAL_SHARE = 0.25  # typed in lower case with no closing mark
LEAD_IN_SHARE = 0.2  # a lead-in first ("In this picture, how many ...")


def casual(text):
    """How a question is often typed: all lower case, no closing mark."""
    return text.lower().rstrip(" ?.!")


def vary(rng, text, lead_ins=()):
    """text as written, typed casually, or (when lead_ins are given) after a lead-in. Templates
    never start with "I", so lower-casing their first letter after a lead-in is safe."""
    r = rng.random()
    if r < CASUAL_SHARE:
        return casual(text)
    if lead_ins and r < CASUAL_SHARE + LEAD_IN_SHARE:
        return rng.choice(lead_ins) + text[0].lower() + text[1:]
    return text


def _template_group(kind, focus):
    """The PICTURE_WORDINGS key of a question kind; a question about an absent object ("cant_tell")
    is worded as the colour question (focus: a shape) or the place question (a coloured shape)."""
    if kind.startswith("count"):
        return "count"
    if kind == "cant_tell":
        return "position" if focus.get("colour") else "colour_of"
    return kind


def picture_question(rng, kind, focus, what):
    """A paraphrase of a picture question of `kind` about `focus` ({"shape": ..., "colour": ...},
    either may be absent); `what` names what a count question counts."""
    template = rng.choice(PICTURE_WORDINGS[_template_group(kind, focus)])
    shape, colour = focus.get("shape", ""), focus.get("colour", "")
    return _typed(rng, template, template.format(what=what, shape=shape, colour=colour, name=f"{colour} {shape}"))


def _typed(rng, template, text):
    """text (the template filled) as `vary` types a picture question: no lead-in where the wording
    names the picture already ("In this picture, where in this image ...")."""
    names_picture = "picture" in template or "image" in template
    return vary(rng, text, () if names_picture else PICTURE_LEAD_INS)


def templated_question(rng, templates, kind, focus, what):
    """A question of `kind` about `focus` in one of templates[its group] (the caller's wordings),
    filled as the grammar's are, its first letter a capital."""
    template = rng.choice(templates[_template_group(kind, focus)])
    text = wording_grammar.fill(rng, template, what, focus.get("shape", ""), focus.get("colour", ""))
    return text[0].upper() + text[1:]


def grammar_question(rng, kind, focus, what, split="training"):
    """A question of `kind` about `focus` in a wording of wording_grammar's `split` half
    ("training" or "dev"), typed as `vary` types it."""
    group = _template_group(kind, focus)
    template = rng.choice(wording_grammar.wordings_of(group, split))
    return _typed(rng, template, wording_grammar.fill(rng, template, what, focus.get("shape", ""),
                                                      focus.get("colour", "")))
