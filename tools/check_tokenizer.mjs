// Cross-check an exported tokenizer.json against the ids our Python tokenizer produced, using
// Hugging Face's pure-JS tokenizers library (npm: @huggingface/tokenizers, installed outside the
// repository).  Driven by tools/check_tokenizer.py, which writes the cases file.
//
//   node tools/check_tokenizer.mjs <tokenizers-package-dir> <model-dir> <cases.jsonl>
//
// Each line of cases.jsonl: {"text": ..., "pieces": [...], "ids": [...]} where pieces is our
// pre-tokenization (before the byte-level mapping) and ids our encoding without BOS.  Checks:
//   1. the PRETOKENIZE_REGEX from tokenizer.json, run by JavaScript's regex engine (u flag),
//      splits the text into exactly `pieces`;
//   2. the library's encode(text, {add_special_tokens: false}) gives exactly `ids`;
//   3. encode(text) (post-processor on) gives [bos] + ids;
//   4. decode(ids) gives the text back.
// Prints "N passed, M failed" and exits non-zero on any failure.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [pkgDir, modelDir, casesPath] = process.argv.slice(2);
const { Tokenizer } = await import(pathToFileURL(path.join(pkgDir, "dist/tokenizers.mjs")).href);
const tj = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8"));
const tc = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tj, tc);
const bos = tj.added_tokens.find((t) => t.content === tc.bos_token).id;
const re = new RegExp(tj.pre_tokenizer.pretokenizers[0].pattern.Regex, "gu");

const eq = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
let passed = 0;
let failed = 0;
const fail = (what, c, got) => {
  failed++;
  if (failed <= 10) console.log(`FAIL ${what}: ${JSON.stringify(c.text).slice(0, 120)}\n  want ${JSON.stringify(what === "pieces" ? c.pieces : c.ids).slice(0, 300)}\n  got  ${JSON.stringify(got).slice(0, 300)}`);
};
for (const line of fs.readFileSync(casesPath, "utf8").split("\n")) {
  if (!line) continue;
  const c = JSON.parse(line);
  const pieces = Array.from(c.text.matchAll(re), (m) => m[0]);
  if (!eq(pieces, c.pieces)) { fail("pieces", c, pieces); continue; }
  const ids = tok.encode(c.text, { add_special_tokens: false }).ids;
  if (!eq(ids, c.ids)) { fail("ids", c, ids); continue; }
  const ids2 = tok.encode(c.text).ids;
  if (!eq(ids2, [bos, ...c.ids])) { fail("ids+bos", c, ids2); continue; }
  const back = c.ids.length ? tok.decode(c.ids) : "";
  if (back !== c.text) { fail("decode", c, back); continue; }
  passed++;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
