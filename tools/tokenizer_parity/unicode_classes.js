// Writes the peer's (V8's) view of the tokenizer's Unicode classes, one byte per code point, in
// the flag layout of engine/tokenizer/unicode_class.h (L=1 M=2 N=4 P=8 S=16 \s=32), so that
// build_corpus.py can keep code points whose class differs between Unicode versions out of the
// parity corpus. Usage: node unicode_classes.js OUT.bin
"use strict";
const fs = require("fs");
const tests = [[/\p{L}/u, 1], [/\p{M}/u, 2], [/\p{N}/u, 4], [/\p{P}/u, 8], [/\p{S}/u, 16], [/\s/u, 32]];
const out = new Uint8Array(0x110000);
for (let cp = 0; cp < 0x110000; ++cp) {
  if (cp >= 0xd800 && cp <= 0xdfff) continue;  // surrogates cannot occur in UTF-8 text
  const ch = String.fromCodePoint(cp);
  let f = 0;
  for (const [re, bit] of tests) if (re.test(ch)) f |= bit;
  out[cp] = f;
}
fs.writeFileSync(process.argv[2], out);
console.log(`unicode ${process.versions.unicode}: wrote ${out.length} code points`);
