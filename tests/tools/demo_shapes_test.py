"""Shape images: the answers agree with the pixels (objects recounted from the rendered image)."""

import unittest

import numpy as np

import demo_support  # noqa: F401
from demo import png, shapes


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

    def test_png_round_trip(self):
        img = shapes.generate(5).images[0]
        data = png.encode_png(img)
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
        np.testing.assert_array_equal(png.decode_png(data), img)
        self.assertEqual(data, png.encode_png(img))


if __name__ == "__main__":
    unittest.main()
