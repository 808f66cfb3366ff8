"""Picture questions in other sentence shapes (shapes.generate's asking_share, issue 21): the
training side of the development cell `image styles_free` (tools/demo/dev_styles.py), where the
2324-step model, asked its picture questions in hand-written wordings, answers another kind of
question ("What's the tally of crosses?" gets "Yes.") and gets 66% of them right against 93% in
training's wordings (docs/demo-eval.md). The wording grammar's frames all open with a few question
words; these sentences are shaped otherwise.

By question group, fields as the grammar's ({what}, {shape}, {colour}, {name}); every filled
sentence differs from every development one (tests/tools/demo_dev_styles_test.py).
"""

ASKINGS = {
    "count": ("Tell me the number of {what} you can spot.", "What number of {what} is shown?",
              "How many {what} would I count?", "{what}: how many?", "Can you count up the {what} for me?",
              "I'd like the number of {what}.", "Total number of {what}?", "How many {what} in there?"),
    "exists": ("Any {colour} {shape} in there?", "Look for a {colour} {shape}: is one there?",
               "Is a {colour} {shape} shown?",
               "Do I see a {colour} {shape} in it?", "Check for a {colour} {shape}, please.",
               "{colour} {shape}, yes or no?"),
    "colour_of": ("The {shape} is which colour?", "What's the {shape}'s colour?", "Tell me the {shape}'s colour.",
                  "Colour of the {shape}?", "How is the {shape} coloured?"),
    "shape_of": ("What is the {colour} shape?", "Which shape is the {colour} one?", "The {colour} shape is a what?",
                 "Tell me which shape is {colour}.", "What shape has the colour {colour}?"),
    "position": ("Where's the {name} placed?", "Show me where the {name} is.",
                 "Which part of the picture has the {name}?", "Locate the {name}.", "Where can I see the {name}?"),
    "size": ("Small or large: the {name}?", "How large is the {name}, small or large?",
             "Is the {name} a large one or a small one?", "Would the {name} count as small or large?"),
}
