"""train: the flash-tiny trainer — a batched PyTorch implementation of the DeepSeek-V4.1 text
model (+ a small DeepSeek-ViT) with quantisation-aware training that matches docs/numerics.md,
indexer distillation, simulated decoder bounded replay, resumable training and export to the
exact checkpoint format.

Import as the package `train` with `<repo>/tools` on sys.path (the scripts add it themselves).
Runs on torch 1.13 (CPU, tests) and torch 2.x (CUDA); optional features are guarded by version.
"""
