#!/usr/bin/env python3
"""Regenerates tokenizer_oracle_data.h: hand-made tokenizer.json files exercising the components
the two shared models do not use, with the ids/decodings the real `tokenizers` library (its
Node.js binding, which wraps the Rust crate) gives for a set of texts.

Usage: (cd /tmp/hf && npm install tokenizers) && \
       python3 tokenizer_oracle_gen.py /tmp/hf/node_modules > tokenizer_oracle_data.h
"""
import json
import os
import subprocess
import sys
import tempfile

ORACLE_JS = r"""
const { Tokenizer } = require('tokenizers');
const fs = require('fs');
(async () => {
  const specs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const out = [];
  for (const spec of specs) {
    let t;
    try { t = Tokenizer.fromString(JSON.stringify(spec.tokenizer)); }
    catch (e) { out.push({ name: spec.name, error: String(e) }); continue; }
    const cases = [];
    for (const text of spec.texts) {
      const e = await t.encode(text);
      const ns = await t.encode(text, null, { addSpecialTokens: false });
      const ids = e.getIds();
      cases.push({ text, ids, ids_no_special: ns.getIds(),
                   decoded: await t.decode(ids, false), decoded_skip: await t.decode(ids, true) });
    }
    out.push({ name: spec.name, tokenizer: spec.tokenizer, cases });
  }
  process.stdout.write(JSON.stringify(out));
})();
"""

TEXTS = [
    "", " ", "  ", "Hello world", " leading space", "trailing space ", "double  space",
    "the thing there", "THE Thing THERE", "tabs\tand\nnewlines\n", "abc 12345 x9y 3.14",
    "a-b--c, d!! (e)?", "Caf\u00e9 na\u00efve \u00c9T\u00c9", "\ufb01 ligature \u00bd \u2460",
    "e\u0301 combining", "<s>hi</s> there", "[MASK] x", " [MASK] y ", "a[MASK]b",
    "foo foobar barfoo foo.", "BAR bar Bar", "<raw> <raw>x y<raw>", "emoji \U0001F642!",
    "\u65e5\u672c\u8a9e", "x\u00a0y\u2003z", "snake_case and camelCase", "don't stop",
    "I'M HE'S we'll 1234567 x12y", "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c\u30c6\u30b9\u30c8 ok",
    "  \n\n  x \r\n", "<|begin_of_text|>hi<|eot_id|>",
]

ASCII = [chr(c) for c in range(0x20, 0x7F)]
LATIN = list("\u00e9\u00ef\u00c9\u00e7\u00bd\u0301")


def bpe(chars, merges, specials=(), prefix=None, suffix=None, extra=(), **opts):
    vocab = {}
    for s in specials:
        vocab.setdefault(s, len(vocab))
    for c in chars:
        vocab.setdefault(c, len(vocab))
        if prefix:
            vocab.setdefault(prefix + c, len(vocab))
        if suffix:
            vocab.setdefault(c + suffix, len(vocab))
    for e in extra:
        vocab.setdefault(e, len(vocab))
    for a, b in merges:
        vocab.setdefault(a + (b[len(prefix):] if prefix else b), len(vocab))
    model = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": prefix,
             "end_of_word_suffix": suffix, "fuse_unk": False, "byte_fallback": False,
             "ignore_merges": False, "vocab": vocab, "merges": [[a, b] for a, b in merges]}
    model.update(opts)
    return model


def added(content, id_, special=True, lstrip=False, rstrip=False, single_word=False,
          normalized=None):
    return {"id": id_, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": (not special) if normalized is None else normalized,
            "special": special}


def tok(model, normalizer=None, pre=None, post=None, decoder=None, added_tokens=()):
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": list(added_tokens), "normalizer": normalizer, "pre_tokenizer": pre,
            "post_processor": post, "decoder": decoder, "model": model}


def template(single, specials):
    pieces = []
    for p in single.split():
        if p == "$A":
            pieces.append({"Sequence": {"id": "A", "type_id": 0}})
        else:
            pieces.append({"SpecialToken": {"id": p, "type_id": 0}})
    return {"type": "TemplateProcessing", "single": pieces, "pair": pieces,
            "special_tokens": {k: {"id": k, "ids": [v], "tokens": [k]} for k, v in specials.items()}}


def byte_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def specs():
    out = []
    meta_merges = [("\u2581", "t"), ("\u2581t", "h"), ("\u2581th", "e"), ("h", "e"), ("e", "r"),
                   ("\u2581", "a")]
    meta_chars = ASCII + LATIN + ["\u2581"]
    for scheme in ["always", "first", "never"]:
        for split in [True, False]:
            m = bpe(meta_chars, meta_merges, specials=["<unk>", "<s>", "</s>"], unk_token="<unk>")
            out.append({"name": f"metaspace_{scheme}_split{int(split)}", "tokenizer": tok(
                m, pre={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme,
                        "split": split},
                decoder={"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme,
                         "split": split},
                post=template("<s> $A </s>", {"<s>": 1, "</s>": 2}),
                added_tokens=[added("<unk>", 0), added("<s>", 1), added("</s>", 2)])})
    m = bpe(meta_chars, meta_merges, specials=["<unk>"], unk_token="<unk>", fuse_unk=True)
    out.append({"name": "metaspace_legacy_fuse_unk", "tokenizer": tok(
        m, pre={"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
        decoder={"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
        added_tokens=[added("<unk>", 0)])})

    # Whitespace + Digits, NFKC + Lowercase, continuing_subword_prefix, no decoder.
    for individual in [True, False]:
        m = bpe(ASCII + LATIN, [("t", "##h"), ("th", "##e"), ("1", "##2"), ("a", "##b")],
                specials=["[UNK]"], prefix="##", unk_token="[UNK]")
        out.append({"name": f"whitespace_digits{int(individual)}_prefix", "tokenizer": tok(
            m, normalizer={"type": "Sequence", "normalizers": [{"type": "NFKC"},
                                                               {"type": "Lowercase"}]},
            pre={"type": "Sequence", "pretokenizers": [
                {"type": "Whitespace"}, {"type": "Digits", "individual_digits": individual}]},
            added_tokens=[added("[UNK]", 0)])})

    # Split behaviours (string and regex, inverted), WhitespaceSplit, Punctuation, CharDelimiter.
    for beh in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]:
        m = bpe(ASCII + LATIN, [("-", "-"), ("t", "h")], specials=["<unk>"], unk_token="<unk>")
        out.append({"name": f"split_{beh}", "tokenizer": tok(m, pre={
            "type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"String": "-"}, "behavior": beh, "invert": False},
                {"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": beh, "invert": True},
                {"type": "Punctuation", "behavior": beh}]},
            decoder={"type": "Fuse"}, added_tokens=[added("<unk>", 0)])})
    m = bpe(ASCII + LATIN, [("t", "h")], specials=["<unk>"], unk_token="<unk>")
    out.append({"name": "whitespace_split_char_delimiter", "tokenizer": tok(m, pre={
        "type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                              {"type": "CharDelimiterSplit", "delimiter": "a"}]},
        added_tokens=[added("<unk>", 0)])})

    # Bert-style: NFD + StripAccents + Lowercase, BertPreTokenizer, Bert/Roberta processing.
    for post in [{"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
                 {"type": "RobertaProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1],
                  "trim_offsets": True, "add_prefix_space": False}]:
        m = bpe(ASCII, [("t", "##h"), ("th", "##e")], specials=["[UNK]", "[CLS]", "[SEP]"],
                prefix="##", unk_token="[UNK]")
        out.append({"name": "bert_" + post["type"], "tokenizer": tok(
            m, normalizer={"type": "Sequence", "normalizers": [
                {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
            pre={"type": "BertPreTokenizer"}, post=post,
            decoder={"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": " ##"}, "content": ""}]},
            added_tokens=[added("[UNK]", 0), added("[CLS]", 1), added("[SEP]", 2)])})

    # GPT-2 style byte level with its own regex, prefix space; Roberta-like added tokens.
    bc = byte_chars()
    gm = [("\u0120", "t"), ("\u0120t", "h"), ("h", "e"), ("\u0120th", "e"), ("e", "r"),
          ("\u0120", "\u0120"), ("o", "o"), ("f", "oo")]
    for prefix_space, use_regex in [(True, True), (False, True), (True, False)]:
        m = bpe(bc, gm, specials=["<s>", "</s>", "<mask>"])
        out.append({"name": f"byte_level_prefix{int(prefix_space)}_regex{int(use_regex)}",
                    "tokenizer": tok(
            m, pre={"type": "ByteLevel", "add_prefix_space": prefix_space, "trim_offsets": True,
                    "use_regex": use_regex},
            post={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                  "use_regex": True},
            decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                     "use_regex": True},
            added_tokens=[added("<s>", 0), added("</s>", 1),
                          added("<mask>", 2, lstrip=True)])})

    # Added-token flags around a Lowercase normalizer.
    m = bpe(ASCII + LATIN, [("t", "h"), ("f", "o"), ("fo", "o")], specials=["<unk>"],
            unk_token="<unk>")
    toks = [added("<unk>", 0), added("<s>", len(m["vocab"])),
            added("</s>", len(m["vocab"]) + 1),
            added("[MASK]", len(m["vocab"]) + 2, lstrip=True, rstrip=True),
            added("foo", len(m["vocab"]) + 3, special=False, single_word=True),
            added("BAR", len(m["vocab"]) + 4, special=False, normalized=True),
            added("<raw>", len(m["vocab"]) + 5, special=False, normalized=False),
            added("the", m["vocab"]["th"] + 0 if False else len(m["vocab"]) + 6, special=False,
                  normalized=True, rstrip=True)]
    out.append({"name": "added_token_flags", "tokenizer": tok(
        m, normalizer={"type": "Lowercase"}, pre={"type": "WhitespaceSplit"},
        post=template("<s> $A </s>", {"<s>": toks[1]["id"], "</s>": toks[2]["id"]}),
        decoder={"type": "Fuse"}, added_tokens=toks)})

    # BPE options.
    out.append({"name": "bpe_ignore_merges", "tokenizer": tok(
        bpe(ASCII, [("t", "h"), ("th", "e")], specials=["<unk>"], extra=["there", "hello"],
            unk_token="<unk>", ignore_merges=True),
        pre={"type": "WhitespaceSplit"}, added_tokens=[added("<unk>", 0)])})
    out.append({"name": "bpe_suffix_decoder", "tokenizer": tok(
        bpe(ASCII, [("t", "h"), ("th", "e</w>"), ("o", "o")], specials=["<unk>"], suffix="</w>",
            unk_token="<unk>"),
        pre={"type": "Whitespace"}, decoder={"type": "BPEDecoder", "suffix": "</w>"},
        added_tokens=[added("<unk>", 0)])})
    for fuse in [False, True]:
        out.append({"name": f"bpe_unk_fuse{int(fuse)}", "tokenizer": tok(
            bpe([c for c in ASCII if c not in "aeiou"], [("t", "h")], specials=["<unk>"],
                unk_token="<unk>", fuse_unk=fuse),
            decoder={"type": "Fuse"}, added_tokens=[added("<unk>", 0)])})
    out.append({"name": "bpe_no_unk_drops", "tokenizer": tok(
        bpe([c for c in ASCII if c not in "aeiou"], [("t", "h")]))})
    fb = [f"<0x{b:02X}>" for b in range(256) if b not in (0x9F, 0xE6)]
    out.append({"name": "byte_fallback_partial", "tokenizer": tok(
        bpe(ASCII + ["\u2581"], [("\u2581", "t"), ("h", "e")], specials=["<unk>"], extra=fb,
            unk_token="<unk>", byte_fallback=True, fuse_unk=True),
        normalizer={"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        decoder={"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        added_tokens=[added("<unk>", 0)])})

    # Llama-3 style: its split regex, byte level without regex, ignore_merges, BOS template.
    llama3_re = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?"
                 "[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    m = bpe(bc, gm + [("1", "2"), ("12", "3")], extra=["there", "\u0120there"],
            ignore_merges=True)
    n = len(m["vocab"])
    out.append({"name": "llama3_style", "tokenizer": tok(
        m, pre={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": llama3_re}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        post={"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
             "use_regex": True},
            template("<|begin_of_text|> $A", {"<|begin_of_text|>": n})]},
        decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                 "use_regex": True},
        added_tokens=[added("<|begin_of_text|>", n), added("<|eot_id|>", n + 1)])})
    # DeepSeek style: CJK runs, digits split, punctuation runs.
    m = bpe(bc, gm)
    out.append({"name": "deepseek_style", "tokenizer": tok(
        m, pre={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated",
             "invert": False},
            {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"},
             "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[\\r\\n]|\\s?[A-Za-z\u00c0-\u024f]+|\\s?[!-/:-~]+|\\s+$"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]},
        decoder={"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                 "use_regex": True})})
    # Gemma style: spaces replaced by the normalizer, no pre-tokenizer, byte fallback.
    fb_all = [f"<0x{b:02X}>" for b in range(256)]
    m = bpe(ASCII + ["\u2581"], [("\u2581", "t"), ("h", "e"), ("\u2581t", "he")],
            specials=["<pad>", "<eos>", "<bos>", "<unk>"], extra=fb_all, unk_token="<unk>",
            byte_fallback=True)
    out.append({"name": "gemma_style", "tokenizer": tok(
        m, normalizer={"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        post=template("<bos> $A", {"<bos>": 2}),
        decoder={"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}]},
        added_tokens=[added("<pad>", 0), added("<eos>", 1), added("<bos>", 2),
                      added("<unk>", 3)])})

    # Normalizers.
    for norm in [{"type": "Strip", "strip_left": True, "strip_right": False},
                 {"type": "Strip", "strip_left": True, "strip_right": True},
                 {"type": "NFKD"}, {"type": "NFD"}, {"type": "NFC"},
                 {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
                 {"type": "Sequence", "normalizers": [{"type": "Lowercase"},
                                                      {"type": "Prepend", "prepend": "_"}]}]:
        out.append({"name": "normalizer_" + json.dumps(norm), "tokenizer": tok(
            bpe(ASCII + LATIN, [("t", "h")], specials=["<unk>"], unk_token="<unk>"),
            normalizer=norm, decoder={"type": "Fuse"}, added_tokens=[added("<unk>", 0)])})
    return out


def main():
    node_modules = sys.argv[1]
    items = specs()
    for s in items:
        s["texts"] = TEXTS
    with tempfile.TemporaryDirectory() as d:
        sp = os.path.join(d, "specs.json")
        js = os.path.join(d, "oracle.js")
        with open(sp, "w") as f:
            json.dump(items, f)
        with open(js, "w") as f:
            f.write(ORACLE_JS)
        env = dict(os.environ, NODE_PATH=node_modules)
        res = json.loads(subprocess.check_output(["node", js, sp], env=env))
    for r in res:
        if "error" in r:
            print(f"skipped {r['name']}: {r['error']}", file=sys.stderr)
    res = [r for r in res if "error" not in r]
    data = json.dumps(res, ensure_ascii=True, separators=(",", ":"))
    print("// Generated by tokenizer_oracle_gen.py from the `tokenizers` library; do not edit.")
    print("#pragma once")
    print("// clang-format off")
    print("inline constexpr const char* kOracleChunks[] = {")
    for i in range(0, len(data), 8000):
        print('R"TQJSON(' + data[i:i + 8000] + ')TQJSON",')
    print("};")
    print("// clang-format on")


if __name__ == "__main__":
    main()
