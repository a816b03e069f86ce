#include "core/sysinfo.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace tq {

int64_t PeakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return int64_t(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

int64_t CurrentRssBytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * int64_t(sysconf(_SC_PAGESIZE));
}

static int64_t MemInfoField(const char* key) {
  std::ifstream f("/proc/meminfo");
  std::string name;
  int64_t kib = 0;
  std::string unit;
  while (f >> name >> kib >> unit) {
    if (name == key) return kib * 1024;
  }
  return 0;
}

int64_t AvailableRamBytes() { return MemInfoField("MemAvailable:"); }
int64_t TotalRamBytes() { return MemInfoField("MemTotal:"); }

}  // namespace tq
