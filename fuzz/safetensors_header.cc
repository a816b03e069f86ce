// libFuzzer target: the safetensors header parser on arbitrary bytes. The input is the file's
// prefix; the file size is the input size, or (first byte odd) larger, so out-of-range offsets
// into a data section that is not there are also explored.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t file_size = size;
  if (size > 0 && (data[0] & 1)) file_size += uint64_t(data[size - 1]) << 8;
  std::map<std::string, std::string> meta;
  try {
    const auto tensors = tq::ParseSafetensorsHeader(data, size, file_size, "fuzz", &meta);
    // Every accepted tensor must lie inside the file.
    for (const auto& t : tensors)
      if (t.offset > file_size || t.nbytes > file_size - t.offset) __builtin_trap();
  } catch (const tq::Error&) {
  }
  return 0;
}
