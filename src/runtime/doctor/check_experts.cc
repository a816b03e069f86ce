// doctor: can the MoE expert cache (model/expert_cache.h) read every expert at its offset? It
// preads the first and last byte of every expert tensor from its shard (what a cache miss does,
// minus the bulk), and reports how many are not 64-byte aligned in the file (harmless: reads land
// in aligned slots) and the experts whose projections sit in different shards.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/tensor_roles.h"
#include "runtime/doctor/doctor_checks.h"
#include "runtime/plan/plan_report.h"

namespace tq {

void CheckExpertStreaming(DoctorState& st) {
  if (!st.config || !st.tensors || !st.config->is_moe()) return;
  const char* check = "expert streaming";
  std::optional<TensorRoleMap> roles;
  try {
    roles.emplace(TensorRoleMap::Of(*st.config, *st.tensors));
  } catch (const Error& e) {
    st.Add(CheckStatus::kWarn, check, fmt::format("skipped: {}", e.what()));
    return;
  }
  std::vector<std::string> files;
  try {
    files = Checkpoint::ShardFiles(st.opts.model_dir);
  } catch (const Error& e) {
    st.Add(CheckStatus::kFail, check, e.what());
    return;
  }
  std::vector<int> fds(files.size(), -1);
  struct Closer {
    std::vector<int>& fds;
    ~Closer() {
      for (int fd : fds)
        if (fd >= 0) ::close(fd);
    }
  } closer{fds};
  int64_t tensors = 0, bytes = 0, unaligned = 0;
  std::map<std::pair<int64_t, int64_t>, uint32_t> shard_of;  // (layer, expert) -> first shard
  std::set<std::pair<int64_t, int64_t>> split;
  for (const TensorInfo& t : *st.tensors) {
    const std::optional<ExpectedTensor> e = roles->Classify(t.name);
    if (!e || !IsExpert(e->role) || t.nbytes == 0) continue;
    TQ_CHECK(t.shard < files.size(), "doctor", "tensor '{}' names shard {}", t.name, t.shard);
    int& fd = fds[t.shard];
    if (fd < 0) fd = ::open(files[t.shard].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      st.Add(CheckStatus::kFail, check,
             fmt::format("cannot open '{}': {}", files[t.shard], std::strerror(errno)));
      return;
    }
    for (uint64_t at : {t.offset, t.offset + t.nbytes - 1}) {
      uint8_t b = 0;
      const ssize_t r = ::pread(fd, &b, 1, off_t(at));
      if (r != 1) {
        st.Add(CheckStatus::kFail, check,
               fmt::format("tensor '{}' cannot be read at offset {} of '{}': {}", t.name, at,
                           files[t.shard], r < 0 ? std::strerror(errno) : "end of file"));
        return;
      }
    }
    ++tensors;
    bytes += int64_t(t.nbytes);
    if (t.offset % 64 != 0) ++unaligned;
    if (e->expert >= 0) {
      const auto key = std::make_pair(e->layer, e->expert);
      const auto [it, fresh] = shard_of.emplace(key, t.shard);
      if (!fresh && it->second != t.shard) split.insert(key);
    }
  }
  if (tensors == 0) {
    st.Add(CheckStatus::kWarn, check,
           "no per-expert tensors found (experts fused as gpt_oss publishes them stream once "
           "converted)");
    return;
  }
  st.Add(CheckStatus::kOk, check,
         fmt::format("{} expert tensors ({}) readable at their offsets in {} shard(s); {} not "
                     "64-byte aligned in the file (reads land in aligned slots); {} experts "
                     "span two shards (two reads per miss)",
                     tensors, HumanBytes(bytes), files.size(), unaligned, split.size()));
}

}  // namespace tq
