"""Shape images: the answers agree with the pixels (objects recounted from the rendered image)."""

import unittest

import numpy as np

import demo_support  # noqa: F401
from demo import png, sample, shapes


def components(mask):
    """Connected components (8-neighbour) of a boolean mask: list of (ys, xs) pixel index arrays."""
    seen = np.zeros_like(mask, dtype=bool)
    out = []
    for y0, x0 in zip(*np.nonzero(mask)):
        if seen[y0, x0]:
            continue
        stack, pix = [(y0, x0)], []
        seen[y0, x0] = True
        while stack:
            y, x = stack.pop()
            pix.append((y, x))
            for ny, nx in ((y + dy, x + dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1)):
                if 0 <= ny < mask.shape[0] and 0 <= nx < mask.shape[1] and mask[ny, nx] and not seen[ny, nx]:
                    seen[ny, nx] = True
                    stack.append((ny, nx))
        ys, xs = zip(*pix)
        out.append((np.array(ys), np.array(xs)))
    return out


def objects_from_pixels(img):
    """[(colour, cell, bbox side, fill)] found by colour segmentation alone (fill = area / bbox area)."""
    found = []
    size = img.shape[0]
    for name, rgb in shapes.SHAPE_COLOURS.items():
        for ys, xs in components(np.all(img == rgb, axis=-1)):
            cell = (int(ys.mean() * 3 // size), int(xs.mean() * 3 // size))
            bbox = (ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1)
            side = max(ys.max() - ys.min() + 1, xs.max() - xs.min() + 1)
            found.append((name, cell, side, len(ys) / bbox))
    return found


# the question kinds with a focus (the thinking picks out the objects they are about)
FOCUSED_KINDS = {"count_shape", "count_colour", "count_both", "exists", "colour_of", "shape_of", "position", "size"}


class ShapesTest(unittest.TestCase):
    def test_scene_recounted_from_pixels(self):
        for seed in range(40):
            s = shapes.generate(seed, size=168)
            img, scene = s.images[0], s.meta["scene"]
            self.assertEqual(img.shape, (168, 168, 3))
            found = objects_from_pixels(img)
            self.assertEqual(sorted((c, cell) for c, cell, _, _ in found),
                             sorted((o["colour"], tuple(o["cell"])) for o in scene["objects"]))
            by_cell = {cell: (side, fill) for _, cell, side, fill in found}
            for o in scene["objects"]:
                side, fill = by_cell[tuple(o["cell"])]
                # radius 0.22 vs 0.42 of a 56 px cell: small shapes span <= 25 px, large >= 39 px
                self.assertEqual(o["size"] == "large", side > 32, (o, side))
                if o["shape"] == "square":
                    self.assertGreater(fill, 0.95)
                if o["shape"] == "circle":
                    self.assertAlmostEqual(fill, np.pi / 4, delta=0.08)
                if o["shape"] in ("triangle", "star"):
                    self.assertLess(fill, 0.6)

    def test_answers_match_the_pixels(self):
        for seed in range(200):
            s = shapes.generate(seed, n_questions=1)
            kind, found = s.meta["question_kind"], objects_from_pixels(s.images[0])
            question = s.messages[0]["content"][1]["text"]
            if kind == "count_all":
                self.assertEqual(s.expected, str(len(found)))
            elif kind == "count_colour":
                colour = next(c for c in shapes.SHAPE_COLOURS if f" {c} " in question)
                self.assertEqual(s.expected, str(sum(1 for c, *_ in found if c == colour)))
            elif kind == "position":
                colour = next(c for c in shapes.SHAPE_COLOURS if f" {c} " in question)
                cells = [cell for c, cell, *_ in found if c == colour]
                self.assertIn(s.expected, [shapes.position_name(cell) for cell in cells])
            elif kind == "colour_of":
                self.assertIn(s.expected, {c for c, *_ in found})
            self.assertIn(s.expected.lower() if kind != "describe" else "", s.final_answer().lower())

    def assert_answer_follows(self, s, kind, objects):
        """The expected answer can be read off the objects the thinking picked out."""
        if kind.startswith("count"):
            self.assertEqual(s.expected, str(len(objects)))
        if kind == "exists":
            self.assertEqual(s.expected, "yes" if objects else "no")
        if kind in ("colour_of", "shape_of", "position", "size"):
            self.assertEqual(len(objects), 1)
            self.assertIn(s.expected, objects[0])

    def test_selection_step_lists_what_the_question_is_about(self):
        kinds = set()
        for seed in range(300):
            s = shapes.generate(seed, mode="thinking", effort=80, n_questions=1, select_step=True, short_counts=True)
            kind, thinking = s.meta["question_kind"], s.final_thinking()
            if kind in ("describe", "count_all"):
                self.assertNotIn(". The ", thinking)  # no selection sentence
                continue
            kinds.add(kind)
            described, selected = thinking.split(". The ", 1)
            listed = [] if selected.endswith(": none.") else selected.split(": ", 1)[1].rstrip(".").split(", ")
            for phrase in listed:
                self.assertIn(phrase, described)  # copied from the description
            self.assert_answer_follows(s, kind, listed)
        self.assertEqual(kinds, FOCUSED_KINDS)

    def test_check_step_marks_each_object_and_lists_the_matches(self):
        kinds = set()
        for seed in range(300):
            s = shapes.generate(seed, mode="thinking", effort=80, n_questions=1, check_step=True, short_counts=True,
                                count_present=0.6)
            kind, thinking = s.meta["question_kind"], s.final_thinking()
            plain = shapes.describe(s.meta["scene"])
            if kind in ("describe", "count_all"):
                self.assertIn(thinking, ("", plain))  # no checks without a focus
                continue
            kinds.add(kind)
            header, rest = thinking.split(". ", 1)
            self.assertTrue(header.startswith("Looking for "))
            described, found_line = rest.rsplit(". Found ", 1)
            count_text, _, checks = described.partition(": ")
            self.assertTrue(plain.startswith(count_text + ": "))
            marked = [c.rsplit(": ", 1) for c in checks.split(", ")]
            # the checks are the plain description, object by object, each with a yes or a no
            self.assertEqual(plain, f"{count_text}: " + ", ".join(phrase for phrase, _ in marked) + ".")
            self.assertTrue(all(mark in ("yes", "no") for _, mark in marked))
            yes = [phrase for phrase, mark in marked if mark == "yes"]
            target = header[len("Looking for "):].split()  # [colour] plural, or colour "shapes"
            colour = target[0] if len(target) == 2 else None
            plural = None if target[-1] == "shapes" else target[-1]
            for phrase, mark in marked:
                _, _, obj_colour, obj_shape = phrase.split()[:4]  # "a small red circle at ..."
                match = colour in (None, obj_colour) and plural in (None, shapes.SHAPE_PLURALS[obj_shape])
                self.assertEqual(mark == "yes", match, (target, phrase))
            self.assertEqual(found_line, f"{len(yes)}" + (": " + ", ".join(yes) if yes else "") + ".")
            self.assert_answer_follows(s, kind, yes)
        self.assertEqual(kinds, FOCUSED_KINDS)

    def test_example_picture_is_its_scene(self):
        """assets/examples/shapes.png (README's image example) is what make_example_image.py draws, and
        the pixels hold the scene's two red circles."""
        import os
        from demo import make_example_image
        path = os.path.join(demo_support.REPO, "assets", "examples", "shapes.png")
        with open(path, "rb") as f:
            img = png.decode_png(f.read())
        np.testing.assert_array_equal(img, shapes.render_scene(make_example_image.SCENE))
        red_fills = [fill for colour, _, _, fill in objects_from_pixels(img) if colour == "red"]
        self.assertEqual(len(red_fills), 2)
        for fill in red_fills:  # a disc fills pi/4 of its bounding box
            self.assertAlmostEqual(fill, 0.785, delta=0.05)

    def test_describe_share_moves_samples_to_described_thinking(self):
        def described(**options):
            samples = [shapes.generate(seed, **options) for seed in range(400)]
            return sum(s.mode == "thinking" and s.effort >= shapes.DESCRIBE_EFFORT for s in samples) / 400

        self.assertAlmostEqual(described(), 0.7 * 0.4, delta=0.07)  # the uniform draw
        self.assertAlmostEqual(described(describe_share=0.8), 0.8 + 0.2 * 0.28, delta=0.07)
        # a mode or effort the caller chose (the eval sets) is kept
        s = shapes.generate(3, mode="chat", describe_share=1.0)
        self.assertEqual((s.mode, s.effort), ("chat", None))
        s = shapes.generate(3, mode="thinking", effort=20, describe_share=1.0)
        self.assertEqual(s.effort, 20)

    def test_small_share_redraws_sizes_inside_cells(self):
        small = total = 0
        for seed in range(200):
            s = shapes.generate(seed, small_share=0.8)
            scene, img = s.meta["scene"], s.images[0]
            by_cell = {cell: side for _, cell, side, _ in objects_from_pixels(img)}
            # every object still found whole in its own cell, its drawn size the one named
            self.assertEqual(sorted(by_cell), sorted(tuple(o["cell"]) for o in scene["objects"]))
            for o in scene["objects"]:
                self.assertEqual(o["size"] == "large", by_cell[tuple(o["cell"])] > 32, (seed, o))
                small += o["size"] == "small"
                total += 1
        self.assertAlmostEqual(small / total, 0.8, delta=0.05)
        self.assertEqual(repr(shapes.generate(5, small_share=None).messages), repr(shapes.generate(5).messages))

    def _drawn_at_half_share(self, key, option):
        """[(seed, sample, plain sample)] of 120 seeds where `option` at share 0.5 drew the objects'
        `key` (about half of them). On every seed the questions and answers are the plain
        sample's, a picture the option left alone is the plain one, and share 0 changes nothing."""
        drawn = []
        for seed in range(120):
            s, plain = shapes.generate(seed, **{option: 0.5}), shapes.generate(seed)
            self.assertEqual(repr(s.messages), repr(plain.messages))
            if key in s.meta["scene"]["objects"][0]:
                drawn.append((seed, s, plain))
            else:
                self.assertTrue(np.array_equal(s.images[0], plain.images[0]))
        self.assertAlmostEqual(len(drawn) / 120, 0.5, delta=0.12)
        self.assertEqual(repr(shapes.generate(5, **{option: 0.0}).meta), repr(shapes.generate(5).meta))
        return drawn

    def test_radius_share_varies_radii_inside_cells_and_ranges(self):
        for seed, s, _ in self._drawn_at_half_share("radius", "radius_share"):
            scene, img = s.meta["scene"], s.images[0]
            by_cell = {cell: side for _, cell, side, _ in objects_from_pixels(img)}
            # every object found whole in its own cell, its drawn side within its size's range
            self.assertEqual(sorted(by_cell), sorted(tuple(o["cell"]) for o in scene["objects"]))
            for o in scene["objects"]:
                lo, hi = shapes.RADIUS_RANGES[o["size"]]
                self.assertTrue(lo <= o["radius"] <= hi, (seed, o))
                # the shapes' bounding boxes span 1.6-2 radii of a 56 px cell; ranges 0.15-0.27 and 0.33-0.46
                self.assertEqual(o["size"] == "large", by_cell[tuple(o["cell"])] > 31, (seed, o))

    def test_shade_share_draws_shades_that_keep_their_names(self):
        for seed, s, plain in self._drawn_at_half_share("rgb", "shade_share"):
            scene, img = s.meta["scene"], s.images[0]
            self.assertFalse(np.array_equal(img, plain.images[0]))
            for o in scene["objects"]:
                # drawn in its shade, and that shade is nearer its own name's colour than any other
                self.assertTrue(np.all(img == o["rgb"], axis=-1).any(), (seed, o))
                dist = {name: np.linalg.norm(np.subtract(o["rgb"], rgb)) for name, rgb in shapes.SHAPE_COLOURS.items()}
                self.assertEqual(min(dist, key=dist.get), o["colour"], (seed, o))
                self.assertTrue(all(abs(a - b) <= shapes.SHADE_SPREAD
                                    for a, b in zip(o["rgb"], shapes.SHAPE_COLOURS[o["colour"]])), (seed, o))

    def test_crowd_share_draws_scenes_of_seven_to_nine_objects(self):
        crowded = 0
        for seed in range(80):
            s = shapes.generate(seed, crowd_share=0.5)
            objects = s.meta["scene"]["objects"]
            if len(objects) <= 6:
                self.assertEqual(repr(s.meta), repr(shapes.generate(seed).meta))
                continue
            crowded += 1
            self.assertLessEqual(len(objects), 9)
            self.assertEqual(len({tuple(o["cell"]) for o in objects}), len(objects))
            found = objects_from_pixels(s.images[0])
            self.assertEqual(sorted((c, cell) for c, cell, _, _ in found),
                             sorted((o["colour"], tuple(o["cell"])) for o in objects))
            if s.meta["question_kind"] == "count_all":
                self.assertEqual(s.expected, str(len(objects)))
        self.assertAlmostEqual(crowded / 80, 0.5, delta=0.15)

    def test_asking_share_rewords_questions_only(self):
        reworded = 0
        for seed in range(80):
            s, plain = shapes.generate(seed, asking_share=0.5), shapes.generate(seed)
            self.assertEqual((s.expected, s.meta["question_kind"]), (plain.expected, plain.meta["question_kind"]))
            self.assertTrue(np.array_equal(s.images[0], plain.images[0]))
            self.assertEqual([m for m in s.messages if m["role"] == "assistant"],
                             [m for m in plain.messages if m["role"] == "assistant"])
            reworded += s.messages[0] != plain.messages[0]
        self.assertGreater(reworded, 20)
        self.assertEqual(repr(shapes.generate(6, asking_share=0.0).messages), repr(shapes.generate(6).messages))

    def test_sizes_and_soft_edges(self):
        drawn, soft = set(), 0
        for seed in range(120):
            s = shapes.generate(seed, sizes=(168, 210, 294), soft_share=0.5)
            img, scene = s.images[0], s.meta["scene"]
            self.assertEqual(img.shape, (s.meta["image_size"],) * 2 + (3,))
            drawn.add(s.meta["image_size"])
            # the same scene and questions as without the options
            plain = shapes.generate(seed)
            self.assertEqual(repr(s.messages), repr(plain.messages))
            self.assertEqual(scene, plain.meta["scene"])
            colours = [shapes.SHAPE_COLOURS[o["colour"]] for o in scene["objects"]] + [scene["background"]]
            off_palette = ~np.any([np.all(img == c, axis=-1) for c in colours], axis=0)
            if off_palette.any():  # blended edges: only in the soft pictures
                soft += 1
                np.testing.assert_array_equal(img, shapes.render_soft(scene, img.shape[0]))
            else:
                np.testing.assert_array_equal(img, shapes.render_scene(scene, img.shape[0]))
            # every object still found in its own cell by its exact colour (its inside is unblended)
            found = sorted({(c, cell) for c, cell, _, _ in objects_from_pixels(img)})
            self.assertEqual(found, sorted({(o["colour"], tuple(o["cell"])) for o in scene["objects"]}), seed)
        self.assertEqual(drawn, {168, 210, 294})
        self.assertAlmostEqual(soft / 120, 0.5, delta=0.12)
        self.assertEqual(repr(shapes.generate(5, sizes=None).messages), repr(shapes.generate(5).messages))

    def test_soft_render_blends_only_edges(self):
        scene = {"background": (255, 255, 255), "objects": [
            {"shape": "circle", "colour": "red", "size": "large", "cell": (1, 1), "jitter": (0.0, 0.0)}]}
        hard, soft = shapes.render_scene(scene, 168), shapes.render_soft(scene, 168)
        self.assertEqual(tuple(soft[84, 84]), shapes.SHAPE_COLOURS["red"])  # inside
        self.assertEqual(tuple(soft[2, 2]), (255, 255, 255))  # background
        differ = np.any(hard != soft, axis=-1)
        self.assertGreater(differ.sum(), 0)
        # differences only within a pixel of the hard edge
        edge = np.zeros_like(differ)
        red = np.all(hard == shapes.SHAPE_COLOURS["red"], axis=-1)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                edge |= red != np.roll(np.roll(red, dy, 0), dx, 1)
        self.assertFalse((differ & ~edge).any())

    def test_check_step_and_select_step_exclude_each_other(self):
        with self.assertRaises(ValueError):
            shapes.generate(1, select_step=True, check_step=True)

    def test_new_options_off_keep_every_sample(self):
        for seed in range(40):
            a = shapes.generate(seed)
            b = shapes.generate(seed, select_step=False, short_counts=False, count_present=0.8, check_step=False,
                                describe_share=0.0, unknown_share=0.0)
            self.assertEqual(repr(a.messages), repr(b.messages))
            for c in (shapes.generate(seed, select_step=True, short_counts=True),
                      shapes.generate(seed, check_step=True, short_counts=True, describe_share=0.8)):
                self.assertEqual(len(a.messages), len(c.messages))  # same questions, kinds and scene
                np.testing.assert_array_equal(a.images[0], c.images[0])

    def test_unknown_share_asks_about_absent_objects(self):
        kinds = set()
        for seed in range(60):
            s = shapes.generate(seed, n_questions=1, unknown_share=1.0, check_step=True, mode="thinking",
                                effort=75)
            if s.meta["question_kind"] == "describe":
                continue
            self.assertEqual(s.meta["question_kind"], "cant_tell")
            q, a, thinking = s.messages[0]["content"][1]["text"], s.messages[1]["content"], s.messages[1]["thinking"]
            self.assertTrue(a.startswith("I can't tell: there is no "), a)
            self.assertTrue(sample.score_answer(s.expected, a, distractors=s.distractors), a)
            self.assertFalse(sample.score_answer(s.expected, "It is red.", distractors=s.distractors))
            words = [w.strip("?") for w in q.split()]
            shape = next(w for w in words if w in shapes.SHAPES)
            colour = next((w for w in words if w in shapes.SHAPE_COLOURS), None)
            self.assertFalse(any(o["shape"] == shape and colour in (None, o["colour"])
                                 for o in s.meta["scene"]["objects"]), q)
            self.assertTrue(thinking.endswith("Found 0."), thinking)
            kinds.add("place" if q.startswith("Where") else "colour")
        self.assertEqual(kinds, {"place", "colour"})
        asked = [shapes.generate(seed, n_questions=3, unknown_share=0.2).meta["question_kind"] for seed in range(60)]
        self.assertIn("cant_tell", asked)
        self.assertNotEqual(set(asked), {"cant_tell"})

    def test_short_count_questions(self):
        asked = 0
        for seed in range(300):
            s = shapes.generate(seed, n_questions=1, short_counts=True, count_present=0.5)
            q = s.messages[0]["content"][1]["text"]
            if q.startswith("How many") and q.endswith("s?") and " are " not in q and " can " not in q:
                asked += 1
                found = objects_from_pixels(s.images[0])
                colour = next((c for c in shapes.SHAPE_COLOURS if f" {c} " in q), None)
                if colour and s.meta["question_kind"] == "count_colour":
                    self.assertEqual(s.expected, str(sum(1 for c, *_ in found if c == colour)))
        self.assertGreater(asked, 15)

    def test_short_count_eval_sample(self):
        answers = []
        for seed in range(60):
            scene_sample = shapes.generate(seed, n_questions=1)
            s = shapes.short_count_sample(1000 + seed, scene_sample.meta["scene"], scene_sample.images[0])
            q = s.messages[0]["content"][1]["text"]
            colour = next(c for c in shapes.SHAPE_COLOURS if f" {c} " in q)
            found = objects_from_pixels(s.images[0])
            shape = next(k for k, v in shapes.SHAPE_PLURALS.items() if q.endswith(f" {v}?"))
            objects = scene_sample.meta["scene"]["objects"]
            want = sum(1 for o in objects if o["colour"] == colour and o["shape"] == shape)
            self.assertEqual(s.expected, str(want))
            self.assertLessEqual(want, sum(1 for c, *_ in found if c == colour))
            self.assertIn(s.expected, s.final_answer())
            answers.append(want)
        self.assertGreater(answers.count(0), 10)
        self.assertGreater(answers.count(1), 10)

    def test_png_round_trip(self):
        img = shapes.generate(5).images[0]
        data = png.encode_png(img)
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
        np.testing.assert_array_equal(png.decode_png(data), img)
        self.assertEqual(data, png.encode_png(img))


if __name__ == "__main__":
    unittest.main()
