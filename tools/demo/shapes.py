"""Image questions on rendered shapes: scenes drawn with numpy, questions with short exact answers.

A scene is a 3x3 grid of cells (position names below); each object fills one cell, so objects never
overlap and every position has one name. Objects: shape (circle, square, triangle, star, cross),
colour (6), size (small/large), cell. Images are uint8 [S, S, 3], S = 168 by default
(= 12x12 ViT patches of 14 px = a 4x4 grid of LLM image tokens at downsample 3); with style_share,
some are other canvases [H, W, 3] with the scene's square centred (`styled_picture`).
"""

import math

import numpy as np

from demo import jpeg_roundtrip, picture_askings, wording_grammar, wordings
from demo.lexicon import SHAPE_PLURALS, SHAPES
from demo.rng import Rng, derive_seed
from demo.sample import Sample

SHAPE_COLOURS = {
    "red": (220, 40, 40), "green": (40, 160, 60), "blue": (40, 80, 220),
    "yellow": (230, 195, 20), "purple": (140, 60, 180), "orange": (245, 135, 20),
}
BACKGROUNDS = ((255, 255, 255), (238, 238, 238), (250, 245, 230), (232, 240, 248))
POSITIONS = (("top left", "top", "top right"), ("left", "centre", "right"),
             ("bottom left", "bottom", "bottom right"))
ALL_POSITIONS = [p for row in POSITIONS for p in row]
SIZES = {"small": 0.22, "large": 0.42}  # radius as a fraction of the cell side
# radius_share (issue 21): an object's radius drawn from its size's range instead of SIZES' one
# value. The ranges stay apart, so "small" and "large" still name every object without doubt.
RADIUS_RANGES = {"small": (0.15, 0.27), "large": (0.33, 0.46)}
# crowd_share (issue 21): scenes of CROWD_OBJECTS objects (both ends included) where random_scene
# draws 1-6.
CROWD_OBJECTS = (7, 9)
# shade_share (issue 21): an object's colour moved off SHAPE_COLOURS' one value, each channel by up
# to SHADE_SPREAD levels, kept at most SHADE_MARGIN of the way to the nearest other colour, so the
# name still holds.
SHADE_SPREAD = 45
SHADE_MARGIN = 0.45
DEFAULT_SIZE = 168


def _convex_mask(xs, ys, vertices):
    """Pixel centres inside a convex polygon (vertices in either winding order)."""
    signs = []
    n = len(vertices)
    for k in range(n):
        (x0, y0), (x1, y1) = vertices[k], vertices[(k + 1) % n]
        signs.append((x1 - x0) * (ys - y0) - (y1 - y0) * (xs - x0))
    return np.logical_and.reduce([sg >= 0 for sg in signs]) | np.logical_and.reduce([sg <= 0 for sg in signs])


def _star_mask(xs, ys, cx, cy, r):
    """Five-pointed star = inner pentagon + five convex point triangles (no even-odd edge cases)."""
    # Vertices with Python's math (libm), not numpy's SIMD trig, so pixels match on every machine.
    outer, inner = [], []
    for k in range(5):
        a = -math.pi / 2 + k * 2 * math.pi / 5
        outer.append((cx + r * math.cos(a), cy + r * math.sin(a)))
        b = a + math.pi / 5
        inner.append((cx + 0.5 * r * math.cos(b), cy + 0.5 * r * math.sin(b)))
    mask = _convex_mask(xs, ys, inner)
    for k in range(5):
        mask |= _convex_mask(xs, ys, [inner[k - 1], outer[k], inner[k]])
    return mask


def shape_mask(shape, xs, ys, cx, cy, r):
    """Boolean mask of one shape centred at (cx, cy) with radius r, on pixel-centre grids xs, ys."""
    dx, dy = xs - cx, ys - cy
    if shape == "circle":
        return dx * dx + dy * dy <= r * r
    if shape == "square":
        return (np.abs(dx) <= 0.85 * r) & (np.abs(dy) <= 0.85 * r)
    if shape == "triangle":
        return _convex_mask(xs, ys, [(cx, cy - r), (cx + 0.95 * r, cy + 0.8 * r), (cx - 0.95 * r, cy + 0.8 * r)])
    if shape == "star":
        return _star_mask(xs, ys, cx, cy, r)
    if shape == "cross":
        arm = 0.32 * r
        return ((np.abs(dx) <= arm) & (np.abs(dy) <= r)) | ((np.abs(dy) <= arm) & (np.abs(dx) <= r))
    raise ValueError(f"unknown shape {shape!r}")


def render_scene(scene, size=DEFAULT_SIZE):
    """uint8 [size, size, 3] image of a scene dict {"background": rgb, "objects": [...]}."""
    img = np.empty((size, size, 3), dtype=np.uint8)
    img[:] = scene["background"]
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float64) + 0.5
    cell = size / 3.0
    for obj in scene["objects"]:
        row, col = obj["cell"]
        cx = (col + 0.5) * cell + obj["jitter"][0] * cell
        cy = (row + 0.5) * cell + obj["jitter"][1] * cell
        r = obj.get("radius", SIZES[obj["size"]]) * cell
        img[shape_mask(obj["shape"], xs, ys, cx, cy, r)] = obj.get("rgb", SHAPE_COLOURS[obj["colour"]])
    return img


def render_soft(scene, size):
    """render_scene drawn at twice the size and averaged over 2x2 pixels: edges blended with the
    background, as in a larger picture the processor has scaled down (bicubic), instead of the
    hard edges of render_scene."""
    big = render_scene(scene, 2 * size).astype(np.float32)
    return np.round(big.reshape(size, 2, size, 2, 3).mean(axis=(1, 3))).astype(np.uint8)


def random_scene(rng, n_objects=None):
    n = n_objects or rng.randint(1, 6)
    cells = rng.sample([(r, c) for r in range(3) for c in range(3)], n)
    objects = []
    for cell in cells:
        size = rng.choice(list(SIZES))
        slack = 0.5 - SIZES[size] - 0.04  # keep the shape inside its cell
        jitter = (round((rng.random() * 2 - 1) * slack, 3), round((rng.random() * 2 - 1) * slack, 3))
        objects.append({"shape": rng.choice(SHAPES), "colour": rng.choice(list(SHAPE_COLOURS)),
                        "size": size, "cell": cell, "jitter": jitter})
    return {"background": rng.choice(BACKGROUNDS), "objects": objects}


def _redraw_sizes(scene, rng, small_share):
    """Each object small with probability small_share, its jitter rescaled to the new size's slack
    so it stays inside its cell. Small shapes are where the pictures' errors were: 69 of the 71
    wrong names in the 1283-step model's descriptions are a small object's shape
    (docs/demo-eval.md)."""
    for o in scene["objects"]:
        size = "small" if rng.chance(small_share) else "large"
        _rescale_jitter(o, SIZES[o["size"]], SIZES[size])
        o["size"] = size


def _rescale_jitter(obj, radius, new_radius):
    """obj's jitter scaled from the slack a shape of `radius` has in its cell to the slack of one of
    `new_radius` (cell fractions; 0.04 kept clear of the cell's edge), so it stays inside its cell."""
    scale = (0.5 - new_radius - 0.04) / (0.5 - radius - 0.04)
    obj["jitter"] = tuple(round(j * scale, 3) for j in obj["jitter"])


def position_name(cell):
    return POSITIONS[cell[0]][cell[1]]


def position_phrase(pos):
    return {"centre": "in the centre", "left": "on the left", "right": "on the right"}.get(pos, f"at the {pos}")


def _count_answer(n):
    return f"There is {n}." if n == 1 else f"There are {n}."


def _numbers_except(n):
    return [str(k) for k in range(10) if k != n]


def _others(values, keep):
    """Wrong values whose words are not part of the right one (so 'top' is no distractor of 'top left')."""
    kw = keep.split()
    return [v for v in values if v != keep and not all(w in kw for w in v.split())]


def _unique(objects, key):
    """Objects whose value of key (a function) no other object shares."""
    values = [key(o) for o in objects]
    return [o for o, v in zip(objects, values) if values.count(v) == 1]


def _question(rng, scene, style=None, count_present=0.8):
    """(question, answer, expected, distractors, kind, focus) valid for the scene; focus is what the
    question is about ({"shape": ..., "colour": ...}, either may be absent) for the selection step.
    style: a second Rng for phrasings added later (None: the original phrasings only), so the main
    stream, and with it every earlier sample, stays the same."""
    objs = scene["objects"]
    kinds = ["count_all", "count_shape", "count_colour", "count_both", "exists"]
    by_shape = _unique(objs, lambda o: o["shape"])
    by_colour = _unique(objs, lambda o: o["colour"])
    by_both = _unique(objs, lambda o: (o["colour"], o["shape"]))
    kinds += ["colour_of"] * bool(by_shape) + ["shape_of"] * bool(by_colour)
    kinds += ["position", "position", "size"] * bool(by_both)
    kind = rng.choice(kinds)
    shape, colour = rng.choice(SHAPES), rng.choice(list(SHAPE_COLOURS))
    if kind == "count_all":
        n = len(objs)
        q = rng.choice(["How many shapes are there?", "How many shapes can you see?", "Count the shapes.",
                        "How many objects are in the picture?"])
        return q, _count_answer(n), str(n), _numbers_except(n), kind, {}
    if kind in ("count_shape", "count_colour", "count_both"):
        if rng.chance(count_present):  # mostly ask about something that is there
            o = rng.choice(objs)
            shape, colour = o["shape"], o["colour"]
        match = {"count_shape": lambda o: o["shape"] == shape, "count_colour": lambda o: o["colour"] == colour,
                 "count_both": lambda o: o["shape"] == shape and o["colour"] == colour}[kind]
        n = sum(1 for o in objs if match(o))
        what = {"count_shape": SHAPE_PLURALS[shape], "count_colour": f"{colour} shapes",
                "count_both": f"{colour} {SHAPE_PLURALS[shape]}"}[kind]
        q = rng.choice([f"How many {what} are there?", f"How many {what} can you see?", f"Count the {what}."])
        if style is not None and style.chance(0.3):
            q = f"How many {what}?"
        focus = {"count_shape": {"shape": shape}, "count_colour": {"colour": colour},
                 "count_both": {"shape": shape, "colour": colour}}[kind]
        return q, _count_answer(n), str(n), _numbers_except(n), kind, focus
    if kind == "exists":
        if rng.chance(0.5):
            o = rng.choice(objs)
            shape, colour = o["shape"], o["colour"]
        there = any(o["shape"] == shape and o["colour"] == colour for o in objs)
        q = rng.choice([f"Is there a {colour} {shape}?", f"Do you see a {colour} {shape}?",
                        f"Is there a {colour} {shape} in the image?"])
        return (q, "Yes." if there else "No.", "yes" if there else "no", ["no" if there else "yes"], kind,
                {"shape": shape, "colour": colour})
    if kind == "colour_of":
        o = rng.choice(by_shape)
        q = rng.choice([f"What colour is the {o['shape']}?", f"Which colour is the {o['shape']}?"])
        a = rng.choice([f"It is {o['colour']}.", f"The {o['shape']} is {o['colour']}."])
        return q, a, o["colour"], _others(list(SHAPE_COLOURS), o["colour"]), kind, {"shape": o["shape"]}
    if kind == "shape_of":
        o = rng.choice(by_colour)
        q = rng.choice([f"What shape is the {o['colour']} one?", f"Which shape is {o['colour']}?"])
        return q, f"It is a {o['shape']}.", o["shape"], _others(list(SHAPES), o["shape"]), kind, {"colour": o["colour"]}
    o = rng.choice(by_both)
    name = f"{o['colour']} {o['shape']}"
    if kind == "position":
        pos = position_name(o["cell"])
        q = rng.choice([f"Where is the {name}?", f"Where is the {name} in the image?"])
        a = f"It is {position_phrase(pos)}."
        return q, a, pos, _others(ALL_POSITIONS, pos), kind, {"shape": o["shape"], "colour": o["colour"]}
    q = rng.choice([f"Is the {name} small or large?", f"How big is the {name}, small or large?"])
    return (q, f"It is {o['size']}.", o["size"], _others(list(SIZES), o["size"]), kind,
            {"shape": o["shape"], "colour": o["colour"]})


def _absent_question(rng, scene):
    """A question about an object the picture does not show, as _question returns it: the colour of
    an absent shape (where one is absent, half the time), else the place of an absent coloured
    shape. The answer says it can't tell and why; naming a colour or a place scores wrong."""
    objs = scene["objects"]
    absent_shapes = [s for s in SHAPES if all(o["shape"] != s for o in objs)]
    if absent_shapes and rng.chance(0.5):
        shape = rng.choice(absent_shapes)
        q = rng.choice([f"What colour is the {shape}?", f"Which colour is the {shape}?"])
        return (q, f"I can't tell: there is no {shape} in the picture.", "can't tell", list(SHAPE_COLOURS),
                "cant_tell", {"shape": shape})
    present = {(o["colour"], o["shape"]) for o in objs}
    colour, shape = rng.choice([(c, s) for c in SHAPE_COLOURS for s in SHAPES if (c, s) not in present])
    q = rng.choice([f"Where is the {colour} {shape}?", f"Where is the {colour} {shape} in the image?"])
    return (q, f"I can't tell: there is no {colour} {shape} in the picture.", "can't tell", list(ALL_POSITIONS),
            "cant_tell", {"shape": shape, "colour": colour})


def _object_phrase(o):
    return f"a {o['size']} {o['colour']} {o['shape']} {position_phrase(position_name(o['cell']))}"


def _in_reading_order(scene):
    return sorted(scene["objects"], key=lambda o: o["cell"])


def _shape_list(scene, phrase=_object_phrase):
    """"I see 3 shapes: " and every object's phrase in reading order, without the full stop."""
    objs = _in_reading_order(scene)
    noun = "shape" if len(objs) == 1 else "shapes"
    return f"I see {len(objs)} {noun}: " + ", ".join(phrase(o) for o in objs)


def describe(scene):
    """One sentence listing every object in reading order (the high-effort thinking)."""
    return _shape_list(scene) + "."


def selection(scene, focus):
    """The thinking's second sentence: the objects the question is about, copied from the
    description ("The red circles: a small red circle at the top, ..." or "...: none."), so the
    answer reads them off instead of searching the whole list. "" when the question has no focus."""
    if not focus:
        return ""
    objs = [o for o in _in_reading_order(scene) if _matches(o, focus)]
    found = ", ".join(_object_phrase(o) for o in objs) if objs else "none"
    return f"The {_focus_name(focus)}: {found}."


def _matches(o, focus):
    """Whether object o has the focus's shape and colour (either may be absent)."""
    return all(o[key] == focus[key] for key in ("shape", "colour") if focus.get(key))


def _focus_name(focus):
    """"red circles", "circles" or "red shapes": what a focused question asks about."""
    shape, colour = focus.get("shape"), focus.get("colour")
    if shape and colour:
        return f"{colour} {SHAPE_PLURALS[shape]}"
    return SHAPE_PLURALS[shape] if shape else f"{colour} shapes"


def checked_description(scene, focus):
    """The description with one yes/no check per object, for a focused question ("Looking for red
    circles. I see 3 shapes: a small green square at the top: no, a large red circle on the right:
    yes, .... Found 1: a large red circle on the right."). Each check reads only the object just
    named and the target named a few tokens earlier, instead of picking the matching objects out of
    the whole list at once (`selection`), which the 1283-step model copies wrongly about one time in
    four (docs/demo-eval.md). The "Found" line repeats the objects marked yes, so the answer reads
    the count, place, size, colour or shape off it."""
    checks = _shape_list(scene, lambda o: f"{_object_phrase(o)}: {'yes' if _matches(o, focus) else 'no'}")
    found = [_object_phrase(o) for o in _in_reading_order(scene) if _matches(o, focus)]
    found_line = f"Found {len(found)}" + (": " + ", ".join(found) if found else "") + "."
    return f"Looking for {_focus_name(focus)}. {checks}. {found_line}"


def _paraphrased(rng, kind, focus):
    """A question of `kind` about `focus` in a wording from wordings.PICTURE_WORDINGS. focus holds
    all a question names (a count_all question has none: it counts "shapes")."""
    return wordings.picture_question(rng, kind, focus, _counted(focus))


def _counted(focus):
    """What a count question about focus counts: "shapes" when it names nothing (count_all)."""
    return _focus_name(focus) if focus else "shapes"


# style_share (issue 21): pictures drawn other than the training's plain squares. Every value here
# is this file's own choice.
STYLE_SIDES = (96, 720)  # the scene square's side in px, drawn log-uniformly
STYLE_MAX_ASPECT = 2.0  # a canvas's long side over its short side at most
STYLE_TINT_DEPTH = 75  # a tinted background: each channel 255 minus up to this
STYLE_SOFT_UP_TO = 360  # soft edges (render_soft) drawn up to this side; larger ones blend in the resize
STYLE_JPEG_SHARE = 0.3  # the share of styled pictures put through a JPEG round trip, last
STYLE_JPEG_QUALITY = (60, 95)  # its IJG quality, a uniform integer in this range (both ends included)


def _blur(img, radius):
    """Separable binomial blur ([1, 2, 1] / 4 at radius 1, [1, 4, 6, 4, 1] / 16 at radius 2), edges
    repeated, rounded half up in integers."""
    taps = {1: (1, 2, 1), 2: (1, 4, 6, 4, 1)}[radius]
    total = sum(taps)
    out = img.astype(np.int64)
    for axis in (0, 1):
        pad = [(0, 0)] * 3
        pad[axis] = (radius, radius)
        padded = np.pad(out, pad, mode="edge")
        n = out.shape[axis]
        acc = sum(t * np.take(padded, np.arange(k, k + n), axis=axis) for k, t in enumerate(taps))
        out = (acc + total // 2) // total
    return out.astype(np.uint8)


def _noise(img, rng):
    """Light noise, per pixel and channel: Gaussian (sigma 1.5-7 levels) or uniform (up to 3-12
    levels either way), from numpy's RandomState (its streams are frozen, so the same on every
    machine) seeded from rng. Returns (image, description)."""
    state = np.random.RandomState(rng.below(2 ** 32))
    if rng.chance(0.5):
        sigma = round(1.5 + rng.random() * 5.5, 2)
        delta, info = state.normal(0.0, sigma, img.shape), ["gaussian", sigma]
    else:
        amp = round(3.0 + rng.random() * 9.0, 2)
        delta, info = state.uniform(-amp, amp, img.shape), ["uniform", amp]
    return np.clip(np.round(img + delta), 0, 255).astype(np.uint8), info


def styled_picture(scene, rng, size, soft, sides=None):
    """The scene drawn in another style (style_share): one or more of a canvas of another size and
    aspect (the scene's square centred on it, the rest background, so every position name still
    holds; its side from STYLE_SIDES, most of them sizes the engine resizes), a tinted background, a
    small blur and light noise; then, for STYLE_JPEG_SHARE of them, a JPEG round trip (4:2:0, IJG
    quality from STYLE_JPEG_QUALITY: `jpeg_roundtrip.roundtrip`), never the only style. rng: the
    style stream; size, soft: the plain picture's side and edges (kept when the canvas is not
    redrawn). sides: (lo, hi) px to draw the scene square's side from instead of STYLE_SIDES, and
    then always on a canvas of its own (None: STYLE_SIDES, a canvas 60% of the time). Returns
    (uint8 [H, W, 3], meta["style"])."""
    canvas, tint, blur, noise = (rng.chance(0.6), rng.chance(0.4), rng.chance(0.35), rng.chance(0.4))
    if not (canvas or tint or blur or noise):
        pick = rng.below(4)
        canvas, tint, blur, noise = (pick == 0, pick == 1, pick == 2, pick == 3)
    canvas = canvas or sides is not None
    info = {}
    background = scene["background"]
    if tint:
        while tuple(background) == tuple(scene["background"]):
            background = tuple(255 - rng.randint(0, STYLE_TINT_DEPTH) for _ in range(3))
        info["tint"] = list(background)
    height = width = side = size
    if canvas:
        lo, hi = (math.log(v) for v in (sides or STYLE_SIDES))
        side = int(round(math.exp(lo + rng.random() * (hi - lo))))
        aspect = 1.0 if rng.chance(0.25) else math.exp((rng.random() * 2 - 1) * math.log(STYLE_MAX_ASPECT))
        height, width = (side, int(round(side * aspect))) if aspect >= 1 else (int(round(side / aspect)), side)
        soft = soft and side <= STYLE_SOFT_UP_TO
        info["canvas"] = [height, width]
    drawn = dict(scene, background=background)
    square = render_soft(drawn, side) if soft else render_scene(drawn, side)
    img = np.empty((height, width, 3), np.uint8)
    img[:] = background
    y0, x0 = (height - side) // 2, (width - side) // 2
    img[y0:y0 + side, x0:x0 + side] = square
    if blur:
        info["blur"] = 1 if rng.chance(0.7) else 2
        img = _blur(img, info["blur"])
    if noise:
        img, info["noise"] = _noise(img, rng)
    # drawn after every other style, so adding it left their values as they were
    if rng.chance(STYLE_JPEG_SHARE):
        info["jpeg"] = rng.randint(*STYLE_JPEG_QUALITY)
        img = jpeg_roundtrip.roundtrip(img, info["jpeg"])
    info["side"] = side
    return img, info


DESCRIBE_QUESTIONS = ("What is in the image?", "Describe the image.", "What do you see?",
                      "Describe this picture.")
DESCRIBE_EFFORT = 61  # thinking-mode turns at or above this effort describe the scene first


def _vary_radii(scene, rng):
    """Each object's radius drawn uniformly from RADIUS_RANGES of its size, its jitter rescaled to
    the new radius's slack (`_rescale_jitter`, as _redraw_sizes does). Every training
    picture had one radius a size, while a picture drawn elsewhere has shapes of any size."""
    for o in scene["objects"]:
        lo, hi = RADIUS_RANGES[o["size"]]
        radius = round(lo + rng.random() * (hi - lo), 3)
        _rescale_jitter(o, SIZES[o["size"]], radius)
        o["radius"] = radius


def _shade(rng, colour):
    """A shade of the named colour (SHADE_SPREAD, SHADE_MARGIN), drawn until it is one."""
    base = np.array(SHAPE_COLOURS[colour], np.float64)
    nearest = min(np.linalg.norm(base - np.array(rgb, np.float64))
                  for name, rgb in SHAPE_COLOURS.items() if name != colour)
    while True:
        rgb = [int(min(255, max(0, v + rng.randint(-SHADE_SPREAD, SHADE_SPREAD)))) for v in SHAPE_COLOURS[colour]]
        if np.linalg.norm(np.array(rgb, np.float64) - base) <= SHADE_MARGIN * nearest:
            return rgb


def _vary_shades(scene, rng):
    """Each object's colour drawn as a shade of its name's (`_shade`): every training picture had
    one RGB value a colour name, while a picture drawn elsewhere has its own red and blue."""
    for o in scene["objects"]:
        o["rgb"] = _shade(rng, o["colour"])


def generate(seed, effort=None, mode=None, n_questions=None, size=DEFAULT_SIZE, select_step=False,
             short_counts=False, count_present=0.8, check_step=False, describe_share=0.0, small_share=None,
             sizes=None, soft_share=0.0, unknown_share=0.0, paraphrase_share=0.0, style_share=0.0,
             grammar_share=0.0, wording_split="training", radius_share=0.0, shade_share=0.0, crowd_share=0.0,
             style_sides=None, question_templates=None, asking_share=0.0):
    """One image sample: an image in the first user turn and 1-3 questions about it.

    Options added after the first runs (their defaults keep earlier samples byte for byte):
    select_step: the describing thinking goes on with the objects the question is about
    (`selection`); short_counts: 30% of count questions are asked as "How many red circles?";
    count_present: the share of count questions about something in the picture; check_step: a
    focused question's thinking is the description with a check per object instead
    (`checked_description`; not together with select_step); describe_share: the share of samples
    (with no mode or effort given) moved to thinking at an effort that describes the picture
    (DESCRIBE_EFFORT-100). Drawn uniformly, only 28% of samples are there (70% thinking x 40%
    of efforts), so most samples never train the description, the densest supervision of what
    the picture shows; the eval asks at effort 75, as the app's "high" preset does. small_share:
    the share of small objects (None: half, as drawn), the hard ones to name (`_redraw_sizes`).
    sizes: picture sides in px to draw from instead of `size` (sizes the processor keeps as they are:
    multiples of 14 within the model's pixel and token limits; the trainer letterboxes any other
    size as the engine does); soft_share: the share drawn with blended edges (`render_soft`). Until the 1644-step
    model every picture was 168 px with hard edges, and it reads other sizes poorly
    (docs/demo-eval.md, "image other_size"). unknown_share: the share of questions about an object
    the picture does not show (`_absent_question`), answered "I can't tell"; the 1644-step model
    answers those "No.", a count or a shape (the sealed test set's "I can't tell" items).
    paraphrase_share: the share of questions (every kind, the absent-object ones too) reworded
    from the wider wordings of `wordings.PICTURE_WORDINGS` (`_paraphrased`); the answer stays the
    kind's. The 1644-step model knows only the few wordings above and answers others mostly wrong
    (docs/demo-eval.md, the sealed test set).
    grammar_share: the share of questions (after paraphrase_share's) worded from
    wording_grammar's half `wording_split`: "training" (50-160 wordings a kind), or "dev",
    the half kept for the development set's `image wording` cell.
    style_share: the share of pictures drawn in another style (`styled_picture`: a canvas of another
    size and aspect with the scene's square centred, a tinted background, a small blur, light
    noise; one or more of them; then for some a JPEG round trip), from a random stream of its own,
    so the scene, questions and answers are the plain sample's. Most of these pictures are at sizes
    the engine resizes: the trainer letterboxes them as the engine does
    (tools/demo/image_preprocess.py). meta["style"] says what was drawn; meta["image_size"] is the
    scene square's side.
    radius_share: the share of pictures whose objects have radii drawn from their size's range
    (`_vary_radii`, a stream of its own; the questions and answers are the plain sample's, which
    never depend on a radius).
    shade_share: the share of pictures whose objects are drawn in shades of their colours
    (`_vary_shades`, a stream of its own; questions and answers name the colours as before).
    crowd_share: the share of samples whose scene has CROWD_OBJECTS objects, drawn from a stream of
    its own in place of random_scene's (the questions are then about that scene).
    style_sides: (lo, hi) px, the styled pictures' scene squares drawn at sides in that range, each
    on a canvas (styled_picture's sides; None: its own range).
    question_templates: {question group: [templates]} the caller words every question with in
    place of the above (groups and fields as wording_grammar's frames: "count", "exists",
    "colour_of", "shape_of", "position", "size"; {what}, {shape}, {colour}, {name}), one drawn
    by the sample's own stream: the development set's hand-written wordings (tools/demo/dev_styles.py).
    asking_share: the share of questions (after grammar_share's) worded from
    picture_askings.ASKINGS, sentences not built from the grammar's frames, from a stream of its own.
    """
    if select_step and check_step:
        raise ValueError("shapes.generate: select_step and check_step are two forms of one step; choose one")
    rng = Rng(seed)
    style = Rng(derive_seed("shapes-style", seed)) if short_counts else None
    unknown = Rng(derive_seed("shapes-unknown", seed)) if unknown_share else None
    paraphrase = Rng(derive_seed("shapes-paraphrase", seed)) if paraphrase_share else None
    grammar = Rng(derive_seed("shapes-grammar", seed)) if grammar_share else None
    asking = Rng(derive_seed("shapes-asking", seed)) if asking_share else None
    wording_grammar.check_split("shapes.generate", wording_split)
    scene = random_scene(rng)
    if crowd_share:
        crowd = Rng(derive_seed("shapes-crowd", seed))
        if crowd.chance(crowd_share):
            scene = random_scene(crowd, crowd.randint(*CROWD_OBJECTS))
    if small_share is not None:
        _redraw_sizes(scene, Rng(derive_seed("shapes-size", seed)), small_share)
    if radius_share:
        radii = Rng(derive_seed("shapes-radius", seed))
        if radii.chance(radius_share):
            _vary_radii(scene, radii)
    if shade_share:
        shades = Rng(derive_seed("shapes-shade", seed))
        if shades.chance(shade_share):
            _vary_shades(scene, shades)
    chosen = mode is not None or effort is not None
    mode = mode or ("thinking" if rng.chance(0.7) else "chat")
    effort = (effort if effort is not None else rng.randint(1, 100)) if mode == "thinking" else None
    if describe_share and not chosen:
        bias = Rng(derive_seed("shapes-describe", seed))  # the main stream stays as it was
        if bias.chance(describe_share):
            mode, effort = "thinking", bias.randint(DESCRIBE_EFFORT, 100)
    n_q = n_questions or rng.weighted([(1, 0.6), (2, 0.25), (3, 0.15)])
    messages = []
    for k in range(n_q):
        if rng.chance(0.1):
            q, a, expected, distractors, kind, focus = (rng.choice(DESCRIBE_QUESTIONS), describe(scene), "", [],
                                                        "describe", {})
        elif unknown is not None and unknown.chance(unknown_share):
            q, a, expected, distractors, kind, focus = _absent_question(unknown, scene)
        else:
            q, a, expected, distractors, kind, focus = _question(rng, scene, style, count_present)
        if paraphrase is not None and paraphrase.chance(paraphrase_share):
            q = _paraphrased(paraphrase, kind, focus)
        if grammar is not None and kind != "describe" and grammar.chance(grammar_share):
            q = wordings.grammar_question(grammar, kind, focus, _counted(focus), wording_split)
        if asking is not None and kind != "describe" and asking.chance(asking_share):
            q = wordings.templated_question(asking, picture_askings.ASKINGS, kind, focus, _counted(focus))
        if question_templates is not None and kind != "describe":
            q = wordings.templated_question(Rng(derive_seed("shapes-templates", seed, k)), question_templates, kind,
                                            focus, _counted(focus))
        if k == 0:
            messages.append({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": q}]})
        else:
            messages.append({"role": "user", "content": q})
        thinking = describe(scene) if effort and effort >= DESCRIBE_EFFORT and kind != "describe" else ""
        if thinking and select_step and focus:
            thinking += " " + selection(scene, focus)
        if thinking and check_step and focus:
            thinking = checked_description(scene, focus)
        messages.append({"role": "assistant", "content": a, "thinking": thinking})
    soft = False
    if sizes:
        look = Rng(derive_seed("shapes-look", seed))  # the main stream stays as it was
        size, soft = look.choice(list(sizes)), look.chance(soft_share)
    styling = Rng(derive_seed("shapes-styles", seed)) if style_share else None  # the other streams stay
    if styling is not None and styling.chance(style_share):
        image, styled = styled_picture(scene, styling, size, soft, style_sides)
        size = styled.pop("side")
    else:
        image, styled = (render_soft(scene, size) if soft else render_scene(scene, size)), None
    meta = {"question_kind": kind, "scene": scene, "image_size": size}
    if styled is not None:
        meta["style"] = styled
    return Sample("image", messages, mode, effort, images=[image], expected=expected,
                  distractors=distractors, meta=meta)


def short_count_sample(seed, scene, image, effort=75, mode="thinking"):
    """"How many red circles?" about a given picture (the image issue's own question): a colour and
    shape that occur more than once (when some do) 30% of the time, those of one object up to half, else
    any pair (often none there), so that no single answer scores well. An eval cell of its own,
    "count_short"; the reference thinking includes the selection step."""
    rng = Rng(seed)
    pairs = [(o["colour"], o["shape"]) for o in scene["objects"]]
    repeated = sorted({p for p in pairs if pairs.count(p) > 1})
    r = rng.random()
    if repeated and r < 0.3:
        colour, shape = rng.choice(repeated)
    elif r < 0.5:
        colour, shape = rng.choice(pairs)
    else:
        shape, colour = rng.choice(SHAPES), rng.choice(list(SHAPE_COLOURS))
    n = sum(1 for o in scene["objects"] if o["shape"] == shape and o["colour"] == colour)
    q = f"How many {colour} {SHAPE_PLURALS[shape]}?"
    thinking = ""
    if mode == "thinking" and effort >= DESCRIBE_EFFORT:
        thinking = describe(scene) + " " + selection(scene, {"shape": shape, "colour": colour})
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": q}]},
                {"role": "assistant", "content": _count_answer(n), "thinking": thinking}]
    meta = {"question_kind": "count_short", "scene": scene, "image_size": image.shape[0]}
    return Sample("image", messages, mode, effort if mode == "thinking" else None, images=[image], expected=str(n),
                  distractors=_numbers_except(n), meta=meta)
