"""Every CUDA kernel waits for the kernel before it (engine/ops/cuda/cuda_compat.cuh).

FD_LAUNCH starts kernels with programmatic dependent launch on Hopper and later: a kernel may run
while its predecessor is still writing its inputs, so each kernel must call fd_wait_prior_grid()
(FD_GRID_PROLOGUE() does) before it touches activations. A kernel that forgets races: on the
emulator kernels run one after another, so no other test there can see it, and on the GPU it
shows up only as occasional wrong numbers. This test reads the kernel sources instead.
"""
import os
import re
import unittest

CUDA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "engine", "ops",
                        "cuda")
WAITS = ("FD_GRID_PROLOGUE()", "fd_wait_prior_grid()")


def kernel_bodies(text):
    """(name, body) of every __global__ function in a source text."""
    for m in re.finditer(r"__global__", text):
        open_brace = text.index(") {", m.start()) + 2
        name = re.search(r"(\w+)\s*\(", text[m.start():open_brace])
        depth, i = 0, open_brace
        while True:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        yield (name.group(1) if name else "?"), text[open_brace:i + 1]


def missing_waits(text):
    return [name for name, body in kernel_bodies(text) if not any(w in body for w in WAITS)]


class GridWaitTest(unittest.TestCase):
    def test_every_kernel_waits_for_the_previous_grid(self):
        files = sorted(f for f in os.listdir(CUDA_DIR) if f.endswith((".cu", ".cuh")))
        self.assertTrue(files)
        kernels, missing = 0, []
        for f in files:
            with open(os.path.join(CUDA_DIR, f), encoding="utf-8") as fh:
                text = fh.read()
            kernels += sum(1 for _ in kernel_bodies(text))
            missing += [f"{f}: {name}" for name in missing_waits(text)]
        self.assertGreater(kernels, 40)
        self.assertEqual(missing, [], "kernels without FD_GRID_PROLOGUE() / fd_wait_prior_grid()")

    def test_a_kernel_without_the_wait_is_found(self):
        text = ("__global__ void good_kernel(float* x) {\n  FD_GRID_PROLOGUE();\n  if (x) { x[0] = 1; }\n}\n"
                "__global__ void bad_kernel(float* x) {\n  if (x) { x[0] = 2; }\n}\n")
        self.assertEqual(missing_waits(text), ["bad_kernel"])


if __name__ == "__main__":
    unittest.main()
