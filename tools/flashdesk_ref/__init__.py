"""flashdesk_ref: an independent PyTorch model of DeepSeek-V4.1-Flash (text), written from
docs/numerics.md and docs/model-spec.md, used as the oracle the C++ engine is compared with.

Modules that need only numpy (safetensors, formats, config, engram_hash) import no torch, so
tools/compare_logits.py and tools/engram_map.py run on Debian's python3 + numpy alone.
"""
