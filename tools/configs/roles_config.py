#!/usr/bin/env python3
"""V4.1-Flash's shapes over eight main layers, one of each attention role, for benchmarks that
run a whole model where the 43 layers do not fit (issue 22: two GPUs against one).

Layers: 0 window-only; 1 window-only with Engram; 2 Full (ratio 2, KV and index source) with
Engram; 3 Reuse (ratio 2); 4 Full (ratio 1) building the candidate blocks, the CED decoder's
first layer; 5 Reuse (ratio 1); 6 Reindex (ratio 1, candidates from layer 4); 7 Reuse (ratio 1,
indexed by layer 6). The three DSpark stages read layers 5-7. Every dimension is V4.1-Flash's;
only the Engram tables are smaller (engram_vocab_size 100000: about 2.4 M rows a layer, not
384 M), so a synthetic checkpoint of it is 60 GB and fits one GPU.

  /usr/bin/python3 tools/configs/roles_config.py > assets/configs/deepseek-v4.1-flash-roles.json
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from flashdesk_ref.engram_hash import engram_primes  # noqa: E402

SOURCE = os.path.join(HERE, "..", "..", "assets", "configs", "deepseek-v4.1-flash.json")
ENGRAM_VOCAB = 100000


def engram_rows(vocab, layers, per_ngram, heads):
    """Rows of each layer's tables: the sums of its primes (flashdesk_ref.engram_hash)."""
    primes = engram_primes(vocab, per_ngram + 1, heads, layers)
    return [int(primes[e].sum()) for e in range(layers)]


def roles_config(source):
    config = json.loads(source)
    config["name"] = "deepseek-v4.1-flash-roles"
    text = config["text_config"]
    text["num_hidden_layers"] = 8
    text["compress_ratios"] = [0, 0, 2, 2, 1, 1, 1, 1] + [0] * text["num_nextn_predict_layers"]
    text["kv_source_layer_ids"] = [2, 4]
    text["index_source_layer_ids"] = [2, 4, 6]
    text["candidate_source_layer_id"] = 4
    text["engram_layer_ids"] = [1, 2]
    text["engram_vocab_size"] = ENGRAM_VOCAB
    text["engram_num_embeddings"] = engram_rows(ENGRAM_VOCAB, 2, text["engram_max_ngram_size"] - 1,
                                                text["engram_n_heads"])
    text["dspark_target_layer_ids"] = [5, 6, 7]
    return config


def main():
    with open(SOURCE, encoding="utf-8") as f:
        json.dump(roles_config(f.read()), sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
