"""Pictures in other styles (issue 21): shapes.generate's style_share (other canvases and sizes, tinted
backgrounds, blur, noise, a JPEG round trip: tools/demo/jpeg_roundtrip.py) and the engine's preprocessing in numpy (tools/demo/image_preprocess.py)
that the trainer runs every picture through. Off by default with every earlier sample unchanged; on,
the picture changes and the scene, questions and answers do not; the port matches the engine."""

import os
import struct
import shutil
import unittest
import zlib

import numpy as np

import demo_support
from demo import image_preprocess, jpeg_roundtrip, shapes, vision_layout
from flashdesk_ref.safetensors import SafeTensorsFile

_digest = demo_support.sample_digest  # the whole sample, hashed

VISION_DATA = os.path.join(demo_support.REPO, "tests", "data", "vision")
FLASH_TINY = {"patch": 14, "downsample": 3, "min_pixels": 28224, "max_image_tokens": 64}
FULL_SIZE = {"patch": 14, "downsample": 3, "min_pixels": 295936, "max_image_tokens": 1024}
KEPT = {168, 182, 196, 210, 224, 238, 252, 266, 280, 294}  # the square sides flash-tiny keeps as drawn


def read_png(path):
    """uint8 [H, W, 3] of an 8-bit RGB PNG with any row filters (the golden input is PIL's)."""
    with open(path, "rb") as f:
        data = f.read()
    pos, idat = 8, b""
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert (depth, colour) == (8, 2)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + 3 * w)
    out = np.zeros((h, w, 3), np.int64)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int64).reshape(w, 3)
        up = out[y - 1] if y else np.zeros((w, 3), np.int64)
        if f in (0, 2):
            out[y] = (line + (up if f == 2 else 0)) % 256
            continue
        for x in range(w):
            a = out[y, x - 1] if x else np.zeros(3, np.int64)
            b, c = up[x], (up[x - 1] if x else np.zeros(3, np.int64))
            if f == 1:
                p = a
            elif f == 3:
                p = (a + b) // 2
            else:
                pa, pb, pc = np.abs(b - c), np.abs(a - c), np.abs(a + b - 2 * c)
                p = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, b, c))
            out[y, x] = (line[x] + p) % 256
    return out.astype(np.uint8)


class EnginePreprocessTest(unittest.TestCase):
    """tools/demo/image_preprocess.py against the engine: the sizes tests/engine/image_preprocess_test.cpp
    derives by hand, and its letterbox golden (PIL's ImageOps.pad, which the engine matches bit for bit)."""

    def test_processed_sizes_are_the_engines(self):
        cases = [((100, 100), FLASH_TINY, (168, 168)), ((300, 500), FLASH_TINY, (196, 336)),
                 ((168, 168), FLASH_TINY, (168, 168)), ((4000, 4000), FULL_SIZE, (1302, 1302)),
                 ((544, 544), FULL_SIZE, (546, 546))]
        for (h, w), vision, want in cases:
            self.assertEqual(image_preprocess.processed_size(h, w, vision), want, (h, w))
        # every flash-tiny picture stays within its 64 image tokens
        for h, w in ((96, 720), (720, 96), (308, 308), (1000, 750), (99, 152), (600, 1200)):
            ph, pw = image_preprocess.processed_size(h, w, FLASH_TINY)
            self.assertEqual((ph % 14, pw % 14), (0, 0))
            self.assertLessEqual(vision_layout.span_length(*vision_layout.grid(ph, pw)), 64)

    def test_letterbox_is_the_engines_bit_for_bit(self):
        img = read_png(os.path.join(VISION_DATA, "shapes-500x300.png"))
        self.assertEqual(img.shape, (300, 500, 3))
        got = image_preprocess.preprocess(img, FLASH_TINY)
        golden = SafeTensorsFile(os.path.join(VISION_DATA, "vision-golden.safetensors")).get("image1.pixels")
        self.assertEqual(got.shape, (196, 336, 3))
        self.assertEqual(int(np.sum(got != golden)), 0)
        # 500x300 into 336x196: 327 wide, offset round(4.5) = 4 (half to even), as the engine's test says
        self.assertTrue(np.all(got[:, :4] == 127) and np.all(got[:, 331:] == 127))
        self.assertFalse(np.all(got[:, 4] == 127))

    def test_pictures_at_their_processed_size_are_kept(self):
        img = shapes.render_scene(shapes.random_scene(shapes.Rng(3)), 210)
        self.assertIs(image_preprocess.preprocess(img, FLASH_TINY), img)

    def test_resize_keeps_flat_colours_and_stays_in_range(self):
        flat = np.full((37, 91, 3), (200, 17, 255), np.uint8)
        for w, h in ((300, 120), (20, 9), (91, 200)):
            np.testing.assert_array_equal(image_preprocess.resize_bicubic(flat, w, h),
                                          np.broadcast_to(flat[0, 0], (h, w, 3)))
        # an upscale (100 px -> 168, flash-tiny's minimum pixels) of a hard edge: monotone, the ends kept
        edge = np.zeros((100, 100, 3), np.uint8)
        edge[:, 50:] = 255
        row = image_preprocess.preprocess(edge, FLASH_TINY)[50, :, 0].astype(int)
        self.assertEqual((row[0], row[-1]), (0, 255))
        self.assertEqual(image_preprocess.preprocess(edge, FLASH_TINY).shape, (168, 168, 3))
        self.assertTrue(np.all(np.diff(row) >= 0))
        self.assertGreater(int(np.sum((row > 0) & (row < 255))), 0)

    def test_resize_is_the_documented_bicubic(self):
        """Against the resize written independently in floating point from its documented definition
        (Keys' cubic, a = -0.5, its support stretched by the downscale factor, weights normalised
        over the window inside the picture): the engine's 22-bit weights and its rounding to 8 bits
        after each pass leave at most one level of difference."""
        def cubic(x):
            x = np.abs(x)
            return np.where(x < 1, (1.5 * x - 2.5) * x * x + 1, np.where(x < 2, ((-0.5 * x + 2.5) * x - 4) * x + 2, 0))

        def matrix(n_in, n_out):
            scale = n_in / n_out
            stretch = max(scale, 1.0)
            centres = (np.arange(n_out) + 0.5) * scale
            w = cubic((np.arange(n_in)[None, :] + 0.5 - centres[:, None]) / stretch)
            return w / w.sum(1, keepdims=True)

        rng = np.random.RandomState(7)
        for (h, w), (oh, ow) in (((60, 80), (168, 224)), ((300, 500), (196, 327)), ((97, 41), (45, 100)),
                                 ((720, 540), (294, 221))):
            img = rng.randint(0, 256, (h, w, 3)).astype(np.uint8)
            img = shapes._blur(img, 2)  # some smooth areas, some sharp
            rows = np.einsum("ijc,pj->ipc", img.astype(float), matrix(w, ow))  # horizontal
            want = np.einsum("oi,ipc->opc", matrix(h, oh), rows)  # then vertical
            got = image_preprocess.resize_bicubic(img, ow, oh).astype(float)
            self.assertEqual(got.shape, (oh, ow, 3))
            self.assertLessEqual(np.abs(got - np.clip(np.round(want), 0, 255)).max(), 1.0, (h, w, oh, ow))


class StyleShareTest(unittest.TestCase):
    OPTIONS = dict(check_step=True, short_counts=True, unknown_share=0.1, sizes=[168, 210, 294], soft_share=0.5,
                   paraphrase_share=0.3)

    def test_off_keeps_every_sample(self):
        for seed in range(40):
            self.assertEqual(_digest(shapes.generate(seed)), _digest(shapes.generate(seed, style_share=0.0)))
            self.assertEqual(_digest(shapes.generate(seed, **self.OPTIONS)),
                             _digest(shapes.generate(seed, style_share=0.0, **self.OPTIONS)))

    def test_on_restyles_about_the_share_and_keeps_the_scene_and_answers(self):
        styled = 0
        for seed in range(300):
            plain = shapes.generate(seed, **self.OPTIONS)
            s = shapes.generate(seed, style_share=0.3, **self.OPTIONS)
            self.assertEqual(repr(s.messages), repr(plain.messages))
            self.assertEqual((s.expected, s.distractors, s.mode, s.effort),
                             (plain.expected, plain.distractors, plain.mode, plain.effort))
            self.assertEqual(s.meta["scene"], plain.meta["scene"])
            if "style" in s.meta:
                styled += 1
                self.assertFalse(s.images[0].shape == plain.images[0].shape
                                 and np.array_equal(s.images[0], plain.images[0]), seed)
            else:
                self.assertEqual(_digest(s), _digest(plain))
        self.assertAlmostEqual(styled / 300, 0.3, delta=0.07)

    def test_styles_vary_and_the_scene_stays_readable(self):
        seen, sides, aspects = set(), set(), set()
        for seed in range(200):
            s = shapes.generate(seed, style_share=1.0)
            img, scene, style = s.images[0], s.meta["scene"], s.meta["style"]
            self.assertTrue(style)
            seen |= set(style)
            side = s.meta["image_size"]
            h, w = style.get("canvas", [side, side])
            self.assertEqual(img.shape, (h, w, 3))
            self.assertEqual(min(h, w), side)
            sides.add(side)
            aspects.add(round(w / h, 1))
            if "blur" in style or "noise" in style or "jpeg" in style:
                continue
            # the scene's square, centred, is the scene drawn at its side on the (tinted) background
            y0, x0 = (h - side) // 2, (w - side) // 2
            background = tuple(style.get("tint", scene["background"]))
            drawn = dict(scene, background=background)
            square = img[y0:y0 + side, x0:x0 + side]
            self.assertTrue(np.array_equal(square, shapes.render_scene(drawn, side))
                            or np.array_equal(square, shapes.render_soft(drawn, side)), seed)
            rest = np.ones((h, w), bool)
            rest[y0:y0 + side, x0:x0 + side] = False
            self.assertTrue(np.all(img[rest] == background))
            if "tint" in style:
                self.assertNotEqual(background, tuple(scene["background"]))
        self.assertEqual(seen, {"canvas", "tint", "blur", "noise", "jpeg"})
        self.assertTrue(sides - KEPT, "sizes outside the kept list")
        self.assertGreater(min(sides), 96 - 1)
        self.assertLess(max(sides), 720 + 1)
        self.assertTrue(any(a < 0.8 for a in aspects) and any(a > 1.25 for a in aspects), aspects)

    def test_noise_and_blur_are_light(self):
        scene = {"background": (255, 255, 255), "objects": [
            {"shape": "square", "colour": "blue", "size": "large", "cell": (1, 1), "jitter": (0.0, 0.0)}]}
        img = shapes.render_scene(scene, 168)
        noisy, info = shapes._noise(img, shapes.Rng(5))
        self.assertLess(np.abs(noisy.astype(int) - img).mean(), 8)
        np.testing.assert_array_equal(noisy, shapes._noise(img, shapes.Rng(5))[0])  # deterministic
        self.assertIn(info[0], ("gaussian", "uniform"))
        for radius in (1, 2):
            blurred = shapes._blur(img, radius).astype(int)
            self.assertEqual(tuple(blurred[84, 84]), shapes.SHAPE_COLOURS["blue"])  # inside kept
            changed = np.any(blurred != img, axis=-1)
            self.assertGreater(changed.sum(), 0)
            blue = np.all(img == shapes.SHAPE_COLOURS["blue"], axis=-1)
            near = np.zeros_like(blue)  # changes only within `radius` px of the edge
            for dy in range(-radius, radius + 1):
                for dx in range(-radius, radius + 1):
                    near |= blue != np.roll(np.roll(blue, dy, 0), dx, 1)
            self.assertFalse((changed & ~near).any())


class JpegRoundTripTest(unittest.TestCase):
    """The JPEG style: jpeg_roundtrip.roundtrip (baseline 4:2:0's lossy steps in numpy) and its place
    among the styles (last, from the style stream, its own share)."""

    def test_flat_colours_come_back(self):
        for colour in ((200, 17, 255), (255, 255, 255), (0, 0, 0), (30, 140, 90), (128, 128, 128)):
            flat = np.full((40, 56, 3), colour, np.uint8)
            for quality in (40, 60, 95):
                got = jpeg_roundtrip.roundtrip(flat, quality).astype(int)
                self.assertLessEqual(np.abs(got - flat).max(), 3, (colour, quality))

    def test_fancy_upsampling_is_libjpegs_integers(self):
        # by hand: row sums 3*own + nearer row (edges repeated), then (3*own + nearer column + 8 or 7) >> 4
        got = jpeg_roundtrip._fancy_up(np.array([[0, 16], [32, 48]]))
        np.testing.assert_array_equal(got, [[0, 4, 12, 16], [8, 12, 20, 24], [24, 28, 36, 40], [32, 36, 44, 48]])

    @unittest.skipUnless(shutil.which("djpeg"), "needs libjpeg-turbo's djpeg (apt-get install libjpeg-turbo-progs)")
    def test_close_to_libjpeg_turbo(self):
        from demo import jpeg_vs_djpeg
        for quality, mean, most, _, over2 in jpeg_vs_djpeg.compare([60, 75, 95]):
            self.assertLess(mean.max(), 0.05, quality)
            self.assertLessEqual(most.max(), 3, quality)
            self.assertLess(over2, 1e-4, quality)

    def test_quality_sets_the_loss(self):
        img = shapes.render_soft(shapes.random_scene(shapes.Rng(3)), 210)
        err = {q: np.abs(jpeg_roundtrip.roundtrip(img, q).astype(int) - img).mean() for q in (40, 95)}
        self.assertLess(err[95], 1.5)
        self.assertGreater(err[40], 1.5 * err[95])
        self.assertGreater(err[95], 0)  # lossy even at 95 (4:2:0 chroma)

    def test_shape_dtype_and_determinism(self):
        rng = np.random.RandomState(11)
        for h, w in ((1, 1), (7, 13), (37, 91), (17, 250), (168, 168)):
            img = shapes._blur(rng.randint(0, 256, (h, w, 3)).astype(np.uint8), 1)
            got = jpeg_roundtrip.roundtrip(img, 75)
            self.assertEqual((got.shape, got.dtype), (img.shape, np.uint8))
            np.testing.assert_array_equal(got, jpeg_roundtrip.roundtrip(img, 75))
        with self.assertRaises(ValueError):
            jpeg_roundtrip.roundtrip(np.zeros((8, 8), np.uint8), 75)
        with self.assertRaises(ValueError):
            jpeg_roundtrip.roundtrip(np.zeros((8, 8, 3), np.uint8), 0)

    def test_about_its_share_last_and_deterministic(self):
        jpegs, qualities = 0, set()
        for seed in range(300):
            s = shapes.generate(seed, style_share=1.0)
            style = s.meta["style"]
            if "jpeg" not in style:
                continue
            jpegs += 1
            quality = style["jpeg"]
            qualities.add(quality)
            self.assertTrue(shapes.STYLE_JPEG_QUALITY[0] <= quality <= shapes.STYLE_JPEG_QUALITY[1])
            self.assertGreater(len(style), 1, seed)  # never the only style
            if jpegs <= 5:
                self.assertEqual(_digest(s), _digest(shapes.generate(seed, style_share=1.0)))
                # the other styles as drawn without it, the round trip applied last
                saved = shapes.STYLE_JPEG_SHARE
                shapes.STYLE_JPEG_SHARE = 0.0
                try:
                    before = shapes.generate(seed, style_share=1.0)
                finally:
                    shapes.STYLE_JPEG_SHARE = saved
                self.assertEqual(before.meta["style"], {k: v for k, v in style.items() if k != "jpeg"})
                np.testing.assert_array_equal(s.images[0], jpeg_roundtrip.roundtrip(before.images[0], quality))
        self.assertAlmostEqual(jpegs / 300, shapes.STYLE_JPEG_SHARE, delta=0.07)
        self.assertGreater(len(qualities), 10)


if __name__ == "__main__":
    unittest.main()
