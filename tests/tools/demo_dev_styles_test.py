"""The development set's styled cells (tools/demo/dev_styles.py): the development set's pictures
and questions, each picture drawn in a style of training's other styles, one file per picture
for both cells of a family, the same run for run; the radii and shades families the styled one's
pictures with other radii or shades; the crowds family scenes of 7-9 objects."""

import json
import os
import pathlib
import re
import tempfile
import unittest

import numpy as np

import demo_support  # (also puts tools/ on the path)
from demo import dev_styles, make_eval, picture_askings, png, shapes, wording_grammar, wordings
from demo.rng import derive_seed

N = 12  # pictures; the describe questions among them are left out, as make_eval leaves them


def _read(out):
    lines = pathlib.Path(out, "eval.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def _run(n=N):
    out = tempfile.mkdtemp()
    dev_styles.main(["--out", out, "--n", str(n)])
    return out, _read(out)


def _question(item):
    return item["messages"][0]["content"][1]["text"]


def _picture(out, item):
    return png.decode_png(pathlib.Path(out, item["messages"][0]["content"][0]["path"]).read_bytes())


class DevStylesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out, cls.items = _run()
        cls.cells = {kind: [it for it in cls.items if it["meta"]["question_kind"] == kind]
                     for kind, _, _ in dev_styles.CELLS}

    def test_the_same_run_for_run(self):
        out, items = _run()
        self.assertEqual(json.dumps(items), json.dumps(self.items))
        for it in items:
            path = it["messages"][0]["content"][0]["path"]
            self.assertEqual(pathlib.Path(out, path).read_bytes(), pathlib.Path(self.out, path).read_bytes())

    def test_the_development_questions_in_both_cells(self):
        plain = list(make_eval.image_items(N, 0, tempfile.mkdtemp()))
        worded = list(make_eval.wording_items(N, 0))
        styles, styles_wording = self.cells["styles"], self.cells["styles_wording"]
        firsts = [self.cells[kind] for kind in ("styles", "radii", "shades")]
        seconds = [self.cells[kind] for kind in ("styles_wording", "radii_wording", "shades_wording")]
        for cell in firsts:
            self.assertEqual(len(cell), len(plain))
        for cell in seconds:
            self.assertEqual(len(cell), len(worded))
        by_source = ((firsts, plain), (seconds, worded))
        pairs = [(mine, theirs) for cells, others in by_source for cell in cells for mine, theirs in zip(cell, others)]
        for mine, theirs in pairs:
            self.assertEqual(_question(mine), _question(theirs))
            self.assertEqual((mine["expected"], mine["distractors"]), (theirs["expected"], theirs["distractors"]))
            asked = theirs["meta"].get("asked_kind", theirs["meta"]["question_kind"])  # the wording cell says
            self.assertEqual(mine["meta"]["asked_kind"], asked)
        # the wording cell asks in other words than the plain one, most of the time
        differ = sum(_question(a) != _question(b) for a, b in zip(styles, styles_wording))
        self.assertGreater(differ, len(styles) // 2)

    def test_pictures_are_styled_and_shared_by_the_cells(self):
        for first, second in (("styles", "styles_wording"), ("styles", "styles_free"), ("styles", "styles_unknown"),
                              ("styles", "styles_unknown_wording"), ("radii", "radii_wording"),
                              ("shades", "shades_wording"), ("crowds", "crowds_wording"),
                              ("large", "large_wording")):
            for a, b in zip(self.cells[first], self.cells[second]):
                self.assertEqual(a["messages"][0]["content"][0]["path"], b["messages"][0]["content"][0]["path"])
        files = os.listdir(os.path.join(self.out, "images"))
        families = ("styles", "radii", "shades", "crowds", "large")
        self.assertEqual(len(files), sum(len(self.cells[kind]) for kind in families))
        seen = set()
        for it in self.cells["styles"]:
            style, picture = it["meta"]["style"], _picture(self.out, it)
            self.assertTrue(set(style) & {"canvas", "tint", "blur", "noise"}, style)
            seen.update(style)
            if "canvas" in style:
                self.assertEqual(list(picture.shape[:2]), style["canvas"])
            # not the plain picture make_eval shows: styled_picture changed something
            side = it["meta"]["image_size"]
            k = int(it["id"].rsplit("-", 1)[1])
            scene = shapes.generate(derive_seed("eval", "image", 0, k), mode="thinking", effort=75,
                                    n_questions=1).meta["scene"]
            plain = shapes.render_scene(scene, side)
            self.assertFalse(picture.shape == plain.shape and np.array_equal(picture, plain), it["id"])
        self.assertGreaterEqual(seen, {"canvas", "tint", "blur", "noise"})

    def test_the_radii_and_shades_families_differ_from_the_styled_one_in_those_only(self):
        for family, option, key in (("radii", "radius_share", "radius"), ("shades", "shade_share", "rgb")):
            for styled, varied in zip(self.cells["styles"], self.cells[family]):
                self.assertEqual(styled["meta"]["style"], varied["meta"]["style"])
                k = int(varied["id"].rsplit("-", 1)[1])
                plain, drawn = (shapes.generate(derive_seed("eval", "image", 0, k), mode="thinking", effort=75,
                                                n_questions=1, **options).meta["scene"]
                                for options in ({}, {option: 1.0}))
                for a, b in zip(plain["objects"], drawn["objects"]):
                    self.assertEqual({n: v for n, v in b.items() if n not in (key, "jitter")},
                                     {n: v for n, v in a.items() if n != "jitter"})
                    self.assertIn(key, b)
                picture = _picture(self.out, varied)
                self.assertFalse(np.array_equal(_picture(self.out, styled), picture), varied["id"])

    def test_the_free_cell_asks_the_same_questions_in_its_own_wordings(self):
        free = self.cells["styles_free"]
        self.assertEqual(len(free), len(self.cells["styles"]))
        for styled, mine in zip(self.cells["styles"], free):
            self.assertEqual((mine["expected"], mine["meta"]["asked_kind"]),
                             (styled["expected"], styled["meta"]["asked_kind"]))
            self.assertNotEqual(_question(mine), _question(styled))

    def test_no_training_wording_is_a_free_one_and_no_training_code_reads_them(self):
        def plain(text):
            return re.sub(r"[^a-z]", "", text.lower())

        fields = {"what": "red circles", "shape": "circle", "colour": "red", "name": "red circle"}
        training = {plain(t.format(**fields)) for group in picture_askings.ASKINGS.values() for t in group}
        training |= {plain(t.format(**fields)) for group in wordings.PICTURE_WORDINGS.values() for t in group}
        training |= {plain(t.format(**fields)) for group in wording_grammar.PICTURE_FRAMES
                     for t in wording_grammar.wordings_of(group, "training")}
        for group, templates in dev_styles.FREE_PICTURE_QUESTIONS.items():
            self.assertIn(group, picture_askings.ASKINGS)
            for t in templates:
                self.assertNotIn(plain(t.format(**fields)), training, t)
        self.assertEqual(demo_support.readers_of("dev_styles", "FREE_PICTURE_QUESTIONS"), [])

    def test_the_unknown_cells_ask_about_objects_the_pictures_do_not_show(self):
        for kind in ("styles_unknown", "styles_unknown_wording"):
            self.assertEqual(len(self.cells[kind]), len(self.cells["styles"]))
            for it in self.cells[kind]:
                self.assertEqual((it["meta"]["asked_kind"], it["expected"]), ("cant_tell", "can't tell"))
        differ = sum(_question(a) != _question(b)
                     for a, b in zip(self.cells["styles_unknown"], self.cells["styles_unknown_wording"]))
        self.assertGreater(differ, len(self.cells["styles"]) // 2)

    def test_the_large_family_draws_the_styled_scenes_at_720_to_1000_px_on_canvases(self):
        for styled, large in zip(self.cells["styles"], self.cells["large"]):
            self.assertEqual(_question(styled), _question(large))
            side, picture = large["meta"]["image_size"], _picture(self.out, large)
            self.assertTrue(720 <= side <= 1000, side)
            self.assertEqual(list(picture.shape[:2]), large["meta"]["style"]["canvas"])
            self.assertGreaterEqual(min(picture.shape[:2]), side)

    def test_the_crowds_family_asks_about_scenes_of_seven_to_nine_objects(self):
        for styled, crowded in zip(self.cells["styles"], self.cells["crowds"]):
            self.assertEqual(styled["meta"]["style"], crowded["meta"]["style"])
            k = int(crowded["id"].rsplit("-", 1)[1])
            sample = shapes.generate(derive_seed("eval", "image", 0, k), mode="thinking", effort=75, n_questions=1,
                                     crowd_share=1.0)
            self.assertTrue(7 <= len(sample.meta["scene"]["objects"]) <= 9)
            self.assertEqual(_question(crowded), sample.messages[0]["content"][1]["text"])
            self.assertEqual(crowded["expected"], sample.expected)

    def test_a_later_run_leaves_no_picture_of_an_earlier_one(self):
        out = tempfile.mkdtemp()
        dev_styles.main(["--out", out, "--n", "12"])
        dev_styles.main(["--out", out, "--n", "4"])
        used = {pathlib.Path(it["messages"][0]["content"][0]["path"]).name for it in _read(out)}
        self.assertEqual(set(os.listdir(os.path.join(out, "images"))), used)


if __name__ == "__main__":
    unittest.main()
