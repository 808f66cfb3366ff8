"""flash-tiny demo data: chat format, tokenizer, task generators and dataset rendering.

Import as the package `demo` with `<repo>/tools` on sys.path (the CLI scripts add it themselves).
Pure Python 3 + numpy: runs on Debian 12's python3 and on the GPU machine without extra packages.
"""
