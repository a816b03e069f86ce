#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "tokenizer/unicode.h"

namespace tq::tok {

void MergeMap::Reserve(size_t n) {
  size_t cap = 16;
  int bits = 4;
  while (cap < n * 2) {
    cap <<= 1;
    ++bits;
  }
  slots_.assign(cap, Entry{kEmpty, 0, 0});
  mask_ = cap - 1;
  shift_ = 64 - bits;
  size_ = 0;
}

void MergeMap::Insert(int32_t a, int32_t b, int32_t rank, int32_t new_id) {
  if ((size_ + 1) * 2 > slots_.size()) {
    std::vector<Entry> old;
    old.swap(slots_);
    Reserve(std::max<size_t>(16, (size_ + 1) * 2));
    for (const Entry& e : old) {
      if (e.key != kEmpty) Insert(int32_t(e.key >> 32), int32_t(uint32_t(e.key)), e.rank, e.new_id);
    }
  }
  const uint64_t key = Key(a, b);
  for (size_t i = Slot(key);; i = (i + 1) & mask_) {
    Entry& e = slots_[i];
    if (e.key == key) {
      e.rank = rank;
      e.new_id = new_id;
      return;
    }
    if (e.key == kEmpty) {
      e = {key, rank, new_id};
      ++size_;
      return;
    }
  }
}

// Words shorter than this many bytes are cached (`tokenizers` caches below 256 too).
constexpr size_t kMaxCachedWord = 256;
// A full cache stops taking new words, as `tokenizers`' does; results never depend on it.
constexpr size_t kCacheCapacityPerShard = 8192;

class BpeModel::Cache {
 public:
  bool Get(std::string_view word, std::vector<int32_t>& out) const {
    const size_t h = StringHash{}(word);
    const Shard& s = shards_[h % kShards];
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(word);
    if (it == s.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void Put(std::string_view word, const int32_t* ids, size_t n) {
    const size_t h = StringHash{}(word);
    Shard& s = shards_[h % kShards];
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.map.size() >= kCacheCapacityPerShard) return;
    s.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + n));
  }

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    StringMap<std::vector<int32_t>> map;
  };
  std::array<Shard, kShards> shards_;
};

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool live;
};

struct QueuedMerge {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
};

// Heap order: the top is the lowest rank, then the leftmost position.
struct MergeAfter {
  bool operator()(const QueuedMerge& a, const QueuedMerge& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

// Per-call scratch of MergeWord, reused by the thread.
struct WordState {
  std::vector<Symbol> symbols;
  std::vector<QueuedMerge> heap;
  int32_t pending_unk = -1;  // an unk symbol not yet emitted (fuse_unk), its id
  std::string scratch;
  void Add(int32_t id) {
    const int32_t n = int32_t(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, true});
  }
};

BpeModel::~BpeModel() = default;

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  auto it = vocab_r_.find(id);
  return it == vocab_r_.end() ? nullptr : it->second;
}

// One character of the word (with prefix/suffix applied in `piece`): its token, else its
// "<0xNN>" byte tokens, else unk (fused with a pending unk when fuse_unk), else dropped.
void BpeModel::AddChar(std::string_view piece, WordState& w) const {
  int32_t id = -1;
  if (piece.size() == 1 && uint8_t(piece[0]) < 0x80) {
    id = ascii_ids_[uint8_t(piece[0])];
  } else {
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) id = it->second;
  }
  if (id >= 0) {
    if (w.pending_unk >= 0) {
      w.Add(w.pending_unk);
      w.pending_unk = -1;
    }
    w.Add(id);
    return;
  }
  if (byte_fallback_) {
    bool all = true;
    for (char c : piece) all &= byte_tokens_[uint8_t(c)] >= 0;
    if (all) {
      for (char c : piece) w.Add(byte_tokens_[uint8_t(c)]);
      return;
    }
  }
  if (unk_token_.empty()) return;  // no unk token: the character is dropped
  TQ_CHECK(unk_id_ >= 0, where_, "unk_token '{}' is not in the vocab", unk_token_);
  if (w.pending_unk >= 0 && !fuse_unk_) w.Add(w.pending_unk);
  w.pending_unk = unk_id_;
}

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>& out) const {
  thread_local WordState w;
  w.symbols.clear();
  w.heap.clear();
  w.pending_unk = -1;
  const bool plain = prefix_.empty() && suffix_.empty();
  size_t i = 0;
  while (i < word.size()) {
    const size_t b = i;
    i += Utf8Len(uint8_t(word[i]));
    if (i > word.size()) i = word.size();
    if (plain) {
      AddChar(word.substr(b, i - b), w);
      continue;
    }
    w.scratch.clear();
    if (b > 0) w.scratch.append(prefix_);
    w.scratch.append(word.substr(b, i - b));
    if (i == word.size()) w.scratch.append(suffix_);
    AddChar(w.scratch, w);
  }
  if (w.pending_unk >= 0) w.Add(w.pending_unk);

  std::vector<Symbol>& sym = w.symbols;
  std::vector<QueuedMerge>& heap = w.heap;
  const int32_t n = int32_t(sym.size());
  for (int32_t k = 0; k + 1 < n; ++k) {
    if (const MergeMap::Entry* m = merges_.Find(sym[k].id, sym[k + 1].id)) {
      heap.push_back({m->rank, k, m->new_id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), MergeAfter{});
  auto push = [&](int32_t pos) {
    const Symbol& s = sym[pos];
    if (s.next < 0) return;
    if (const MergeMap::Entry* m = merges_.Find(s.id, sym[s.next].id)) {
      heap.push_back({m->rank, pos, m->new_id});
      std::push_heap(heap.begin(), heap.end(), MergeAfter{});
    }
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), MergeAfter{});
    const QueuedMerge top = heap.back();
    heap.pop_back();
    Symbol& left = sym[top.pos];
    if (!left.live || left.next < 0) continue;
    Symbol& right = sym[left.next];
    // A stale entry: the pair at this position changed since it was queued.
    const MergeMap::Entry* cur = merges_.Find(left.id, right.id);
    if (!cur || cur->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.live = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  for (const Symbol& s : sym) {
    if (s.live) out.push_back(s.id);
  }
  // Do not keep a huge word's scratch alive in every thread that once saw one.
  if (sym.capacity() > (size_t{1} << 20)) {
    std::vector<Symbol>().swap(sym);
    std::vector<QueuedMerge>().swap(heap);
  }
}

void BpeModel::MergeCached(std::string_view word, std::vector<int32_t>& out) const {
  const bool cacheable = word.size() < kMaxCachedWord;
  if (cacheable && cache_->Get(word, out)) return;
  const size_t start = out.size();
  MergeWord(word, out);
  if (cacheable) cache_->Put(word, out.data() + start, out.size() - start);
}

bool BpeModel::IsSingleToken(char32_t c, std::string_view bytes) const {
  if (c < 0x80) return ascii_ids_[c] >= 0;
  return vocab_.find(bytes) != vocab_.end();
}

bool BpeModel::Crossable(char32_t a, char32_t b) const {
  if (a < 0x80 && b < 0x80) return crossable_ascii_[a * 128 + b];
  return crossable_.count((uint64_t(a) << 32) | b) != 0;
}

void BpeModel::TokenizeLong(std::string_view word, std::vector<int32_t>& out) const {
  size_t chunk = 0, i = 0;
  char32_t prev = 0;
  bool prev_single = false;
  while (i < word.size()) {
    const size_t b = i;
    const char32_t c = NextChar(word, i);
    const bool single = IsSingleToken(c, word.substr(b, i - b));
    // Both sides plain one-character tokens that no merged token ever joins: cut here.
    if (b > chunk && prev_single && single && !Crossable(prev, c)) {
      MergeCached(word.substr(chunk, b - chunk), out);
      chunk = b;
    }
    prev = c;
    prev_single = single;
  }
  MergeCached(word.substr(chunk), out);
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Chunking relies on a merged token being the plain concatenation of its parts and on no
  // character's token depending on its place in the word: no prefix/suffix.
  if (word.size() >= kMaxCachedWord && prefix_.empty() && suffix_.empty()) {
    TokenizeLong(word, out);
    return;
  }
  MergeCached(word, out);
}

std::unique_ptr<BpeModel> BpeModel::FromJson(const Json& j, const std::string& where) {
  const std::string w = where + ": model";
  TQ_CHECK(j.is_object(), w, "must be an object");
  if (j.contains("type")) {
    const std::string type = GetString(j, "type", w);
    TQ_CHECK(type == "BPE", where, "unsupported model type '{}' (only BPE is supported)", type);
  } else {
    TQ_CHECK(j.contains("merges"), where, "model has no 'type' and is not BPE (no 'merges')");
  }
  std::unique_ptr<BpeModel> m(new BpeModel);
  m->where_ = w;
  m->cache_ = std::make_unique<Cache>();
  const Json& vocab = Field(j, "vocab", w);
  TQ_CHECK(vocab.is_object(), w, "field 'vocab' must be an object of token -> id");
  m->vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    TQ_CHECK(it.value().is_number_integer(), w, "vocab entry '{}' must be an integer id", it.key());
    const int64_t id = it.value().get<int64_t>();
    TQ_CHECK(id >= 0 && id <= INT32_MAX, w, "vocab entry '{}' has id {} out of range", it.key(),
             id);
    TQ_CHECK(IsValidUtf8(it.key()), w, "vocab entry with invalid UTF-8");
    m->vocab_[it.key()] = int32_t(id);
    m->max_id_ = std::max(m->max_id_, id);
  }
  for (const auto& [tok, id] : m->vocab_) m->vocab_r_.emplace(id, &tok);

  m->prefix_ = GetStringOr(j, "continuing_subword_prefix", "", w);
  m->suffix_ = GetStringOr(j, "end_of_word_suffix", "", w);
  m->unk_token_ = GetStringOr(j, "unk_token", "", w);
  if (!m->unk_token_.empty()) {
    auto it = m->vocab_.find(m->unk_token_);
    if (it != m->vocab_.end()) m->unk_id_ = it->second;
  }
  m->fuse_unk_ = GetBoolOr(j, "fuse_unk", false, w);
  m->byte_fallback_ = GetBoolOr(j, "byte_fallback", false, w);
  m->ignore_merges_ = GetBoolOr(j, "ignore_merges", false, w);
  for (int c = 0; c < 128; ++c) {
    auto it = m->vocab_.find(std::string_view(reinterpret_cast<const char*>(&c), 1));
    m->ascii_ids_[c] = it == m->vocab_.end() ? -1 : it->second;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = m->vocab_.find(fmt::format("<0x{:02X}>", b));
    m->byte_tokens_[b] = it == m->vocab_.end() ? -1 : it->second;
  }

  const Json& merges = j.contains("merges") ? GetArray(j, "merges", w) : Json::array();
  m->merges_.Reserve(merges.size());
  m->crossable_ascii_.assign(128 * 128, false);
  auto id_of = [&](const std::string& tok, size_t rank) {
    auto it = m->vocab_.find(tok);
    TQ_CHECK(it != m->vocab_.end(), w, "merge {} references '{}', which is not in the vocab", rank,
             tok);
    return it->second;
  };
  for (size_t r = 0; r < merges.size(); ++r) {
    const Json& e = merges[r];
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      TQ_CHECK(sp != std::string::npos, w, "merge {} '{}' is not two tokens separated by a space",
               r, s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      TQ_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string(), w,
               "merge {} must be \"a b\" or [\"a\", \"b\"]", r);
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    }
    TQ_CHECK(b.size() >= m->prefix_.size(), w, "merge {}: '{}' is shorter than the prefix", r, b);
    const int32_t ia = id_of(a, r), ib = id_of(b, r);
    const std::string s = a + b.substr(m->prefix_.size());
    m->merges_.Insert(ia, ib, int32_t(r), id_of(s, r));
    if (s.empty()) continue;
    size_t i = 0;
    char32_t prev = NextChar(s, i);
    while (i < s.size()) {
      const char32_t c = NextChar(s, i);
      if (prev < 0x80 && c < 0x80) {
        m->crossable_ascii_[prev * 128 + c] = true;
      } else {
        m->crossable_.insert((uint64_t(prev) << 32) | c);
      }
      prev = c;
    }
  }
  return m;
}

}  // namespace tq::tok
