// CRC-32C (Castagnoli, the iSCSI/ext4 checksum; reflected polynomial 0x82F63B78) of checkpoint
// files: `convert` records each shard's size and CRC in config.json (quantization.files) and
// `doctor` recomputes them, so a byte changed anywhere in a converted checkpoint is found.
// x86-64 with SSE4.2 uses the crc32 instruction (~8 bytes per cycle); elsewhere slicing-by-8
// tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tq {

// Continues `crc` (0 to start) over `n` bytes.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);
// The table path alone (what non-x86 hosts run), for tests.
uint32_t Crc32cPortable(uint32_t crc, const void* data, size_t n);
// The CRC-32C of a whole file, read in 1 MiB blocks; tq::Error naming the file on a read error.
uint32_t Crc32cOfFile(const std::string& path, uint64_t* size = nullptr);
// "0x1234abcd".
std::string Crc32cHex(uint32_t crc);

}  // namespace tq
