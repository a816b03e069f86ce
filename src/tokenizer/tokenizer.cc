#include "tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/unicode.h"

namespace tq {

using tok::Piece;
using tok::Segment;

Tokenizer::Tokenizer(std::unique_ptr<tok::Pipeline> p) : p_(std::move(p)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::FromJson(const std::string& json_text,
                                               const std::string& where) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(tok::ParseTokenizerJson(json_text, where)));
}

std::unique_ptr<Tokenizer> Tokenizer::Load(const std::string& model_dir) {
  const std::string path = model_dir + "/tokenizer.json";
  return FromJson(ReadFileToString(path), path);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view input, bool add_special_tokens) const {
  std::string fixed;
  if (!tok::IsValidUtf8(input)) {
    fixed = tok::ToValidUtf8(input);
    input = fixed;
  }
  const tok::Pipeline& p = *p_;
  std::vector<int32_t> ids;
  ids.reserve(input.size() / 3 + 4);

  // 1. Added tokens matched on the raw text.
  std::vector<Segment> raw;
  if (p.raw_matcher->empty()) {
    if (!input.empty()) raw.push_back({0, input.size(), -1});
  } else {
    p.raw_matcher->Split(input, raw);
  }

  std::vector<Segment> norm_segs;
  std::vector<Piece> pieces;
  std::string normalized;
  for (const Segment& seg : raw) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    // 2. Normalize the plain piece, then match the normalized added tokens in it.
    normalized.assign(input.substr(seg.begin, seg.end - seg.begin));
    if (p.normalizer) p.normalizer->Normalize(normalized);
    norm_segs.clear();
    if (p.norm_matcher->empty()) {
      if (!normalized.empty()) norm_segs.push_back({0, normalized.size(), -1});
    } else {
      p.norm_matcher->Split(normalized, norm_segs);
    }
    for (const Segment& ns : norm_segs) {
      if (ns.id >= 0) {
        ids.push_back(ns.id);
        continue;
      }
      // 3. Pre-tokenize into words, 4. BPE each word.
      pieces.clear();
      pieces.push_back(
          {normalized.substr(ns.begin, ns.end - ns.begin), seg.begin == 0 && ns.begin == 0});
      if (p.pre_tokenizer) p.pre_tokenizer->PreTokenize(pieces);
      for (const Piece& w : pieces) p.model->Tokenize(w.text, ids);
    }
  }
  // 5. Special tokens around the sequence.
  if (add_special_tokens && p.post_processor) p.post_processor->Process(ids);
  return ids;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const tok::Pipeline& p = *p_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    auto added = p.added_text.find(id);
    const std::string* tok = added != p.added_text.end() ? &added->second : p.model->IdToToken(id);
    if (!tok) continue;
    // `tokenizers` asks whether the token's content is that of a special added token.
    if (skip_special_tokens && p.special_contents.count(*tok)) continue;
    tokens.push_back(*tok);
  }
  if (!p.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out.push_back(' ');
      out.append(tokens[i]);
    }
    return out;
  }
  p.decoder->DecodeChain(tokens);
  std::string out;
  for (const std::string& t : tokens) out.append(t);
  return out;
}

int64_t Tokenizer::vocab_size() const { return p_->vocab_size; }

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  auto it = p_->added_by_content.find(token);
  if (it != p_->added_by_content.end()) return it->second;
  return p_->model->TokenToId(token);
}

std::string Tokenizer::IdToToken(int32_t id) const {
  auto it = p_->added_text.find(id);
  if (it != p_->added_text.end()) return it->second;
  const std::string* t = p_->model->IdToToken(id);
  return t ? *t : std::string();
}

bool Tokenizer::IsSpecial(int32_t id) const {
  auto it = p_->added_by_id.find(id);
  return it != p_->added_by_id.end() && p_->special_contents.count(it->second.content) > 0;
}

}  // namespace tq
