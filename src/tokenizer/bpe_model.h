// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): a vocab, merges turned into a
// (left id, right id) -> (rank, merged id) map, and the `tokenizers` merge loop (a priority queue
// over adjacent pairs, lowest rank then leftmost first), with byte_fallback, unk_token/fuse_unk,
// ignore_merges, continuing_subword_prefix/end_of_word_suffix, and a cache for repeated words.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tokenizer/json_util.h"

namespace tq::tok {

// Hash for heterogeneous (string_view) lookups in string-keyed maps.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// Open-addressing map (left id, right id) -> (rank, merged id).
class MergeMap {
 public:
  struct Entry {
    uint64_t key;
    int32_t rank;
    int32_t new_id;
  };
  void Reserve(size_t n);
  // A later duplicate pair overwrites the earlier one (as `tokenizers` collects into a map).
  void Insert(int32_t a, int32_t b, int32_t rank, int32_t new_id);
  const Entry* Find(int32_t a, int32_t b) const {
    const uint64_t key = Key(a, b);
    for (size_t i = Slot(key);; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t Key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  size_t Slot(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<Entry> slots_ = std::vector<Entry>(1, Entry{kEmpty, 0, 0});
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

struct WordState;  // per-thread scratch of the merge loop

class BpeModel {
 public:
  static std::unique_ptr<BpeModel> FromJson(const Json& j, const std::string& where);
  ~BpeModel();

  // Appends the ids of one pre-tokenized word.
  void Tokenize(std::string_view word, std::vector<int32_t>& out) const;

  // The plain merge loop on the whole word: no chunking, no cache, no ignore_merges shortcut.
  // Tokenize() must agree with it on every word (tests compare the two).
  void TokenizeUnchunked(std::string_view word, std::vector<int32_t>& out) const {
    MergeWord(word, out);
  }

  std::optional<int32_t> TokenToId(std::string_view token) const;
  const std::string* IdToToken(int32_t id) const;  // nullptr if unknown
  int64_t max_id() const { return max_id_; }       // -1 for an empty vocab
  int64_t vocab_count() const { return int64_t(vocab_.size()); }

 private:
  BpeModel() = default;
  void MergeWord(std::string_view word, std::vector<int32_t>& out) const;
  void MergeCached(std::string_view word, std::vector<int32_t>& out) const;
  void TokenizeLong(std::string_view word, std::vector<int32_t>& out) const;
  bool IsSingleToken(char32_t c, std::string_view bytes) const;
  bool Crossable(char32_t a, char32_t b) const;
  void AddChar(std::string_view piece, WordState& w) const;
  class Cache;

  std::string where_;
  StringMap<int32_t> vocab_;
  std::unordered_map<int32_t, const std::string*> vocab_r_;
  int64_t max_id_ = -1;
  MergeMap merges_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  std::string unk_token_;        // "" when none
  int32_t unk_id_ = -1;          // -1 when unk_token is unset or not in the vocab
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  int32_t ascii_ids_[128];    // id of each 1-byte token, -1 if none
  int32_t byte_tokens_[256];  // id of "<0xNN>", -1 if none
  std::unique_ptr<Cache> cache_;
  // Adjacent character pairs found inside some merged token: a merge can only ever join two
  // symbols across a boundary whose two characters form such a pair, so a long word splits into
  // independent chunks at every other boundary (same result, and the chunks hit the cache).
  std::vector<bool> crossable_ascii_;  // [128 * 128]
  std::unordered_set<uint64_t> crossable_;
};

}  // namespace tq::tok
