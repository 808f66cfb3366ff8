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
Two more cells, "radii" and "radii_wording", ask the same questions about the same styled
pictures with each shape's radius drawn from its size's range (shapes.generate's radius_share):
the shapes of other sizes that a picture drawn elsewhere has, where training drew one radius a
size. The radius stream is the picture's own too, so the two families differ in the radii only.
"styles_unknown" and "styles_unknown_wording" ask the styled pictures about an object they do not
show (shapes.generate's unknown_share: "I can't tell"), in training's wordings and in the
grammar's development half. "shades" and "shades_wording" do the same with each shape's colour drawn as a shade of its name's
(shade_share), the radii as drawn. "crowds" and "crowds_wording" draw scenes of 7-9 objects
(crowd_share) where training's have 1-6: their scenes, and so their questions, are their own.
"large" and "large_wording" draw the styled pictures' scene squares at 720-1000 px (style_sides),
each on a canvas, where training's styled ones are 96-720 px and the plain ones at most 294 px.

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
# (cell, picture family, generator options): a family's pictures are one set of files
CELLS = (("styles", "styled", {}), ("styles_wording", "styled", DEV_WORDING),
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
