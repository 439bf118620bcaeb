// make_cases.mjs — the expected ids of the WordPiece / WordLevel / Unigram fixtures, from
// Hugging Face's `tokenizers` (the Rust core through its Node binding, npm tokenizers@0.23.2,
// pinned in package.json beside this file):
//
//   cd tools/tokfixtures && npm ci && node make_cases.mjs ../../tests/fixtures/tokenizers
//
// For each of wordpiece/, wordlevel/, unigram/: reads tokenizer.json and texts.jsonl, writes
// cases.jsonl, one line per text:
//   {"text", "ids": encode(text, add_special_tokens=false), "ids_special": encode(text),
//    "decoded": decode(ids, skip_special_tokens=false),
//    "decoded_skip": decode(ids_special, skip_special_tokens=true)}
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Tokenizer } = require("tokenizers");

const fix = process.argv[2];
if (!fix) {
  console.error("usage: node make_cases.mjs FIXTURE_DIR");
  process.exit(2);
}
for (const name of ["wordpiece", "wordlevel", "unigram"]) {
  const dir = join(fix, name);
  const tok = Tokenizer.fromString(readFileSync(join(dir, "tokenizer.json"), "utf8"));
  const texts = readFileSync(join(dir, "texts.jsonl"), "utf8").split("\n").filter((l) => l.length).map((l) => JSON.parse(l));
  const lines = [];
  for (const text of texts) {
    const ids = Array.from((await tok.encode(text, null, { addSpecialTokens: false })).getIds());
    const idsSpecial = Array.from((await tok.encode(text, null, { addSpecialTokens: true })).getIds());
    const decoded = ids.length ? await tok.decode(ids, false) : "";
    const decodedSkip = idsSpecial.length ? await tok.decode(idsSpecial, true) : "";
    lines.push(JSON.stringify({ text, ids, ids_special: idsSpecial, decoded, decoded_skip: decodedSkip }) + "\n");
  }
  writeFileSync(join(dir, "cases.jsonl"), lines.join(""));
  console.log(`${name}: ${lines.length} cases`);
}
