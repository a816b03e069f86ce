#include "runtime/synth_tokenizer.h"

#include <fmt/format.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "core/error.h"

namespace tq {
namespace {

std::string Utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 upwards.
std::vector<std::string> ByteSymbols() {
  std::vector<std::string> sym(256);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    sym[b] = Utf8(printable ? b : next++);
  }
  return sym;
}

// Special tokens of each family, in id order; the tail is filled with reserved tokens.
std::vector<std::string> Specials(SynthTokenizerStyle style) {
  switch (style) {
    case SynthTokenizerStyle::kLlama3:
      return {"<|begin_of_text|>",
              "<|end_of_text|>",
              "<|reserved_special_token_0|>",
              "<|reserved_special_token_1|>",
              "<|finetune_right_pad_id|>",
              "<|reserved_special_token_2|>",
              "<|start_header_id|>",
              "<|end_header_id|>",
              "<|eom_id|>",
              "<|eot_id|>"};
    case SynthTokenizerStyle::kQwen:
      return {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    case SynthTokenizerStyle::kMistral:
      return {"<unk>", "<s>", "</s>"};
  }
  return {};
}

constexpr const char* kSplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

}  // namespace

SynthTokenizerFiles MakeSynthTokenizer(SynthTokenizerStyle style, int64_t vocab) {
  const bool specials_first = style == SynthTokenizerStyle::kMistral;
  std::vector<std::string> specials = Specials(style);
  if (!specials_first) {  // Llama 3 and Qwen reserve a block of 256 special ids at the end
    for (size_t i = specials.size(); i < 256; ++i) {
      specials.push_back(fmt::format("<|reserved_special_token_{}|>", i));
    }
  }
  const int64_t n_special = int64_t(specials.size());
  TQ_CHECK(vocab >= 256 + n_special, "synth tokenizer",
           "vocabulary of {} is too small for 256 byte tokens and {} special tokens", vocab,
           n_special);
  const int64_t regular = vocab - n_special;
  const int64_t first_regular = specials_first ? n_special : 0;
  const int64_t first_special = specials_first ? 0 : regular;

  // Regular tokens: byte symbols, then merges token + letter over a small alphabet, breadth
  // first, so every merge joins two existing tokens into a new one.
  const std::vector<std::string> bytes = ByteSymbols();
  std::vector<std::string> tokens(bytes);
  nlohmann::json merges = nlohmann::json::array();
  std::vector<std::string> alphabet;
  alphabet.push_back(bytes[' ']);  // "Ġ": words start with a space
  for (char c = 'a'; c <= 'z'; ++c) alphabet.push_back(bytes[uint8_t(c)]);
  for (char c = 'A'; c <= 'Z'; ++c) alphabet.push_back(bytes[uint8_t(c)]);
  for (char c = '0'; c <= '9'; ++c) alphabet.push_back(bytes[uint8_t(c)]);
  std::unordered_set<std::string> seen(tokens.begin(), tokens.end());
  std::vector<std::string> level = alphabet;
  while (int64_t(tokens.size()) < regular) {
    std::vector<std::string> next_level;
    for (const auto& left : level) {
      for (const auto& right : alphabet) {
        if (int64_t(tokens.size()) >= regular) break;
        std::string t = left + right;
        if (!seen.insert(t).second) continue;
        merges.push_back({left, right});
        tokens.push_back(t);
        next_level.push_back(std::move(t));
      }
    }
    level = std::move(next_level);
  }

  nlohmann::json vocab_json = nlohmann::json::object();
  for (int64_t i = 0; i < regular; ++i) vocab_json[tokens[size_t(i)]] = first_regular + i;
  nlohmann::json added = nlohmann::json::array();
  for (int64_t i = 0; i < n_special; ++i) {
    vocab_json[specials[size_t(i)]] = first_special + i;
    added.push_back({{"id", first_special + i},
                     {"content", specials[size_t(i)]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  std::string bos, eos;
  std::vector<std::string> eos_gen;
  std::string chat;
  switch (style) {
    case SynthTokenizerStyle::kLlama3:
      bos = "<|begin_of_text|>";
      eos = "<|eot_id|>";
      eos_gen = {"<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"};
      chat =
          "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] "
          "+ '<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{% endfor %}{% if "
          "add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% "
          "endif %}";
      break;
    case SynthTokenizerStyle::kQwen:
      eos = "<|im_end|>";
      eos_gen = {"<|im_end|>", "<|endoftext|>"};
      chat =
          "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt "
          "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";
      break;
    case SynthTokenizerStyle::kMistral:
      bos = "<s>";
      eos = "</s>";
      eos_gen = {"</s>"};
      chat =
          "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ "
          "'[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + "
          "eos_token }}{% endif %}{% endfor %}";
      break;
  }
  auto id_of = [&](const std::string& s) { return vocab_json.at(s).get<int64_t>(); };

  SynthTokenizerFiles f;
  nlohmann::json& t = f.tokenizer;
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = added;
  t["normalizer"] = style == SynthTokenizerStyle::kQwen ? nlohmann::json{{"type", "NFC"}}
                                                        : nlohmann::json(nullptr);
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"},
                           {"pattern", {{"Regex", kSplitRegex}}},
                           {"behavior", "Isolated"},
                           {"invert", false}},
                          {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}}}}};
  if (!bos.empty()) {
    t["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, {{"id", bos}, {"ids", {id_of(bos)}}, {"tokens", {bos}}}}}}};
  } else {
    t["post_processor"] = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}};
  }
  t["decoder"] = {{"type", "ByteLevel"},
                  {"add_prefix_space", true},
                  {"trim_offsets", true},
                  {"use_regex", true}};
  t["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", false},
                {"vocab", vocab_json},
                {"merges", merges}};

  nlohmann::json& c = f.tokenizer_config;
  c["tokenizer_class"] = "PreTrainedTokenizerFast";
  c["bos_token"] = bos.empty() ? nlohmann::json(nullptr) : nlohmann::json(bos);
  c["eos_token"] = eos;
  c["add_bos_token"] = !bos.empty();
  c["add_eos_token"] = false;
  c["model_max_length"] = 131072;
  c["chat_template"] = chat;
  c["clean_up_tokenization_spaces"] = false;

  nlohmann::json& g = f.generation_config;
  if (!bos.empty()) g["bos_token_id"] = id_of(bos);
  nlohmann::json eos_ids = nlohmann::json::array();
  for (const auto& e : eos_gen) eos_ids.push_back(id_of(e));
  g["eos_token_id"] = eos_ids;
  g["do_sample"] = true;
  g["temperature"] = style == SynthTokenizerStyle::kQwen ? 0.7 : 0.6;
  g["top_p"] = style == SynthTokenizerStyle::kQwen ? 0.8 : 0.9;
  if (style == SynthTokenizerStyle::kQwen) g["top_k"] = 20;
  return f;
}

}  // namespace tq
