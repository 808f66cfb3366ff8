"""The development set's styled pictures (issue 21), for `flashdesk-cli eval --data DIR`:

  cd tools && /usr/bin/python3 -m demo.dev_styles --out ../build/eval/demo-styles

The sealed test set changes the pictures (sizes, aspects, backgrounds, noise, blur, file formats)
and the wordings at once; the development set (make_eval.py) varied sizes and wordings apart, on
plain pictures. These two cells take the development set's 74 pictures and questions (the eval
seeds of make_eval's image cells) and draw each picture as training's other styles are drawn
(shapes.styled_picture: canvases of 96-720 px and other aspects, tinted backgrounds, blur,
noise, JPEG round trips), so decisions can weigh how a model does on styled pictures without
looking at the sealed set:
- "image styles": the development questions as make_eval's image cells ask them;
- "image styles_wording": the same questions in wording_grammar's development half, as
  make_eval's wording cell asks them.
Both cells show the same styled picture (the style stream is the picture's own, not the
question's). meta: question_kind ("styles" or "styles_wording"), asked_kind (the kind of question
asked), style (what styled_picture drew) and image_size (the scene square's side).
More cells on the same 74 questions (the families of pictures differ from the styled one in one
thing each; every stream is the picture's own):
- "radii", "radii_wording": each shape's radius drawn from its size's range (shapes.generate's
  radius_share), where training drew one radius a size;
- "shades", "shades_wording": each shape's colour a shade of its name's (shade_share);
- "crowds", "crowds_wording": scenes of 7-9 objects (crowd_share) where training's have 1-6 (their
  scenes, and so their questions, are their own);
- "large", "large_wording": the scene squares at 720-1000 px (style_sides), each on a canvas,
  where training's styled ones are 96-720 px and the plain ones at most 294 px;
and on the styled pictures themselves:
- "styles_free": the questions in wordings written here by hand (FREE_PICTURE_QUESTIONS), not built
  from the wording grammar;
- "styles_unknown", "styles_unknown_wording": questions about an object the picture does not show
  (unknown_share: "I can't tell"), in training's wordings and in the grammar's development half.

Written at run time, not committed with the development set: the noisy pictures take about 9 MB
a family as PNG, the large family's about 50 MB (87 MB in all).
"""

import argparse
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from demo import png  # noqa: E402
from demo.make_eval import _eval_pictures, _item, write_items  # noqa: E402

DEV_WORDING = {"grammar_share": 1.0, "wording_split": "dev"}
LARGE_SIDES = (720, 1000)  # px: the "large" family's scene squares, each on a canvas of its own
# The "styles_free" cell's wordings, written by hand for the development set (not built from the
# wording grammar, never read by a training generator: tests/tools/demo_dev_styles_test.py), by
# question group; fields as the grammar's.
FREE_PICTURE_QUESTIONS = {
    "count": ("Give me a number: how many {what}?", "I'm after the {what}. How many are in it?",
              "What's the tally of {what}?", "Number of {what} in the drawing?",
              "Could you tell me how many {what} the drawing has?"),
    "exists": ("Spot any {colour} {shape}?", "{colour} {shape}: present or not?",
               "Would I find a {colour} {shape} in the drawing?", "Has the drawing got a {colour} {shape}?"),
    "colour_of": ("The {shape}: which colour?", "Of what colour is the {shape}?", "Which colour has the {shape} got?",
                  "Name the colour of the {shape}."),
    "shape_of": ("The {colour} one: which shape?", "{colour} belongs to which shape?",
                 "What kind of shape is {colour}?", "Which figure is coloured {colour}?"),
    "position": ("Where would I find the {name}?", "Point me to the {name}.",
                 "In what part of the drawing is the {name}?", "Which spot holds the {name}?"),
    "size": ("Size of the {name}: small or large?", "Would you call the {name} small or large?",
             "Is the {name} one of the small ones or the large ones?"),
}
# (cell, picture family, generator options): a family's pictures are one set of files
CELLS = (("styles", "styled", {}), ("styles_wording", "styled", DEV_WORDING),
         ("styles_free", "styled", {"question_templates": FREE_PICTURE_QUESTIONS}),
         ("styles_unknown", "styled", {"unknown_share": 1.0}),
         ("styles_unknown_wording", "styled", dict(DEV_WORDING, unknown_share=1.0)),
         ("radii", "radii", {"radius_share": 1.0}), ("radii_wording", "radii", dict(DEV_WORDING, radius_share=1.0)),
         ("shades", "shades", {"shade_share": 1.0}), ("shades_wording", "shades", dict(DEV_WORDING, shade_share=1.0)),
         ("crowds", "crowds", {"crowd_share": 1.0}), ("crowds_wording", "crowds", dict(DEV_WORDING, crowd_share=1.0)),
         ("large", "large", {"style_sides": LARGE_SIDES}),
         ("large_wording", "large", dict(DEV_WORDING, style_sides=LARGE_SIDES)))


def styled_items(n, seed, out_dir, kind, options, drawn, family="styled"):
    """Items of one cell: make_eval's eval pictures k < n (describe questions left out) drawn with
    style_share 1.0, each picture written once, as images/FAMILY-K.png. drawn: {(family, k):
    picture} of the cells before, which this cell's pictures must equal (one file serves every cell
    of a family)."""
    os.makedirs(os.path.join(out_dir, "images"), exist_ok=True)
    for k, s in _eval_pictures(n, seed, style_share=1.0, **options):
        rel = f"images/{family}-{k}.png"
        if (family, k) not in drawn:
            drawn[family, k] = s.images[0]
            png.write_png(os.path.join(out_dir, rel), s.images[0])
        elif not np.array_equal(drawn[family, k], s.images[0]):
            raise AssertionError(f"dev_styles: picture {k} of cell {kind} differs from the one written")
        item = _item(s, f"image-{kind}-{k}", [rel])
        item["meta"].update(question_kind=kind, asked_kind=s.meta["question_kind"])
        yield item


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write the development set's styled picture cells.")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=80, help="pictures (make_eval's image cells: --n 20 x 4)")
    ap.add_argument("--seed", type=int, default=0, help="make_eval's --seed")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for family in sorted({family for _, family, _ in CELLS}):  # an earlier run's pictures
        for old in glob.glob(os.path.join(args.out, "images", f"{family}-*.png")):
            os.remove(old)
    drawn = {}
    write_items(args.out, [styled_items(args.n, args.seed, args.out, kind, options, drawn, family)
                           for kind, family, options in CELLS])


if __name__ == "__main__":
    main()
