#!/usr/bin/env python3
"""Writes assets/examples/shapes.png: a picture in the demo model's picture style (168x168, four
shapes, two of them red circles) to try image questions with, e.g.

  flashdesk-cli generate --model assets/models/flash-tiny --image assets/examples/shapes.png \\
      --prompt "How many red circles?"

It is drawn from a fixed scene, not from the eval seeds, so it is no eval item.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from demo import png, shapes  # noqa: E402

SCENE = {"background": (255, 255, 255), "objects": [
    {"shape": "circle", "colour": "red", "size": "large", "cell": (0, 0), "jitter": (0.0, 0.0)},
    {"shape": "square", "colour": "blue", "size": "small", "cell": (0, 2), "jitter": (0.05, 0.0)},
    {"shape": "circle", "colour": "red", "size": "small", "cell": (1, 1), "jitter": (0.0, 0.05)},
    {"shape": "triangle", "colour": "green", "size": "large", "cell": (2, 0), "jitter": (0.0, 0.0)},
]}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets", "examples", "shapes.png")
    png.write_png(os.path.normpath(out), shapes.render_scene(SCENE))
    print(f"wrote {os.path.normpath(out)}: {shapes.describe(SCENE)}")


if __name__ == "__main__":
    main()
