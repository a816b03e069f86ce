// Fuzzes tokenizer.json loading and encoding/decoding. The first input byte picks the mode:
//   0: the rest is text, encoded (and decoded back) by the shared models' tokenizers when found
//      ($TQ_SHARED_DIR or ../../../shared from build/fuzz, else the repository's models/) and
//      by two built-in tokenizers;
//      it is also read as raw int32 ids and decoded;
//   1: the rest is a tokenizer.json, loaded, then used on a fixed multilingual text;
//   2: the rest is "<tokenizer.json>\0<text>": load, then encode and decode the text.
// Any failure must be a tq::Error; crashes, hangs and other exceptions are bugs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

// Byte-level BPE with the GPT-2 regex, NFC, added tokens with lstrip/rstrip/single_word.
const char kByteLevel[] = R"({"version": "1.0", "added_tokens": [
  {"id": 0, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false,
   "normalized": false, "special": true},
  {"id": 1, "content": "<mask>", "single_word": false, "lstrip": true, "rstrip": true,
   "normalized": false, "special": true},
  {"id": 2, "content": "word", "single_word": true, "lstrip": false, "rstrip": false,
   "normalized": true, "special": false}],
 "normalizer": {"type": "NFC"},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
   {"type": "Digits", "individual_digits": true},
   {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}]},
 "post_processor": {"type": "TemplateProcessing",
   "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|end|>", "type_id": 0}}],
   "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [0], "tokens": ["<|end|>"]}}},
 "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "vocab": {"<|end|>": 0, "<mask>": 1, "word": 2, "a": 3, "b": 4,
   "\u0120": 5, "\u0120a": 6, "ab": 7, "\u0120ab": 8, "1": 9},
   "merges": ["\u0120 a", "a b", "\u0120a b"]}})";

// SentencePiece-like: Metaspace, lowercase, byte fallback, unk, Strip/Replace decoders.
const char kMetaspace[] = R"({"version": "1.0", "added_tokens": [
  {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false,
   "normalized": false, "special": true}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Lowercase"},
   {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "Strip"}]},
 "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
   "split": true},
 "post_processor": null,
 "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"},
   {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"},
   {"type": "Strip", "content": " ", "start": 1, "stop": 1}]},
 "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
   "vocab": {"<unk>": 0, "<0xC3>": 1, "<0xA9>": 2, "\u2581": 3, "a": 4, "\u2581a": 5},
   "merges": [["\u2581", "a"]]}})";

std::vector<std::unique_ptr<tq::Tokenizer>>& Tokenizers() {
  static std::vector<std::unique_ptr<tq::Tokenizer>> toks = [] {
    std::vector<std::unique_ptr<tq::Tokenizer>> v;
    v.push_back(tq::Tokenizer::FromJson(kByteLevel, "byte-level"));
    v.push_back(tq::Tokenizer::FromJson(kMetaspace, "metaspace"));
    std::string shared = "../../../shared";
    if (const char* env = std::getenv("TQ_SHARED_DIR"); env && *env) shared = env;
    for (const char* m : {"tq-llama-21m", "tq-qwen3moe-17m"}) {
      const std::string dir = shared + "/models/" + m;
      const std::string shipped = std::string("../../models/") + m;  // in the repository
      if (std::filesystem::exists(dir + "/tokenizer.json")) {
        v.push_back(tq::Tokenizer::Load(dir));
      } else if (std::filesystem::exists(shipped + "/tokenizer.json")) {
        v.push_back(tq::Tokenizer::Load(shipped));
      }
    }
    return v;
  }();
  return toks;
}

// `check_ids`: every id must be in the vocab (true of well-formed files; a fuzzed template may
// name any id).
void RoundTrip(const tq::Tokenizer& tok, const std::string& text, bool check_ids) {
  for (bool special : {true, false}) {
    const std::vector<int32_t> ids = tok.Encode(text, special);
    for (int32_t id : ids) {
      if (check_ids && (id < 0 || id >= tok.vocab_size())) __builtin_trap();
    }
    (void)tok.Decode(ids, !special);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0] % 3;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (mode == 0) {
      std::vector<int32_t> raw(rest.size() / 4);
      if (!raw.empty()) std::memcpy(raw.data(), rest.data(), raw.size() * 4);
      for (const auto& tok : Tokenizers()) {
        RoundTrip(*tok, rest, true);
        (void)tok->Decode(raw, false);
      }
      return 0;
    }
    std::string json = rest, text = "Hello  w\xC3\xB6rld 123 <|end|> \xF0\x9F\x99\x82 \xE6\x97\xA5";
    if (mode == 2) {
      const size_t nul = rest.find('\0');
      if (nul == std::string::npos) return 0;
      json = rest.substr(0, nul);
      text = rest.substr(nul + 1);
    }
    const auto tok = tq::Tokenizer::FromJson(json, "fuzz");
    RoundTrip(*tok, text, false);
    (void)tok->TokenToId(text);
    (void)tok->IdToToken(int32_t(size));
  } catch (const tq::Error&) {
  }
  return 0;
}
