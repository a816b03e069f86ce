// `plan` output: a human table and one JSON object with the same fields.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "runtime/plan/memory_plan.h"

namespace tq {

std::string HumanBytes(int64_t bytes);  // "1.5 GiB", "12.0 MiB", "512 B"
std::string PlanToText(const MemoryPlan& plan);
nlohmann::ordered_json PlanToJson(const MemoryPlan& plan);
// One line: "fits", "fits only with ...: --context N or --prefill-step M", "does not fit: ...".
std::string VerdictLine(const MemoryPlan& plan);

}  // namespace tq
