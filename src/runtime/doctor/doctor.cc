#include "runtime/doctor/doctor.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/doctor/doctor_checks.h"
#include "tokenizer/tokenizer.h"

namespace tq {

const char* CheckStatusName(CheckStatus s) {
  switch (s) {
    case CheckStatus::kOk:
      return "ok";
    case CheckStatus::kWarn:
      return "warn";
    case CheckStatus::kFail:
      return "fail";
  }
  return "?";
}

bool DoctorReport::ok() const { return Count(CheckStatus::kFail) == 0; }

int DoctorReport::Count(CheckStatus s) const {
  return int(std::count_if(checks.begin(), checks.end(),
                           [&](const CheckResult& c) { return c.status == s; }));
}

DoctorReport RunDoctor(const DoctorOptions& opts) {
  DoctorReport report;
  DoctorState st;
  st.opts = opts;
  st.out = &report.checks;
  CheckFiles(st);
  if (!report.checks.empty() && report.checks.front().check == "model dir") return report;
  CheckTensors(st);
  CheckQuantization(st);
  CheckQuantizationMap(st);
  CheckFileChecksums(st);
  CheckExpertStreaming(st);
  CheckTokenizer(st);
  CheckMachine(st);
  return report;
}

std::string DoctorToText(const DoctorReport& r) {
  size_t width = 0;
  for (const auto& c : r.checks) width = std::max(width, c.check.size());
  std::string out;
  for (const auto& c : r.checks)
    out += fmt::format("{:<4}  {:<{}}  {}\n", CheckStatusName(c.status), c.check, width, c.hint);
  out += fmt::format("{} ok, {} warn, {} fail\n", r.Count(CheckStatus::kOk),
                     r.Count(CheckStatus::kWarn), r.Count(CheckStatus::kFail));
  return out;
}

nlohmann::ordered_json DoctorToJson(const DoctorReport& r) {
  nlohmann::ordered_json j;
  j["ok"] = r.ok();
  j["counts"] = {{"ok", r.Count(CheckStatus::kOk)},
                 {"warn", r.Count(CheckStatus::kWarn)},
                 {"fail", r.Count(CheckStatus::kFail)}};
  j["checks"] = nlohmann::ordered_json::array();
  for (const auto& c : r.checks)
    j["checks"].push_back(
        {{"status", CheckStatusName(c.status)}, {"check", c.check}, {"hint", c.hint}});
  return j;
}

}  // namespace tq
