// turboquant::Plan (include/turboquant/plan.h) over runtime/plan.
#include "api/api_errors.h"
#include "runtime/plan/memory_plan.h"
#include "turboquant/plan.h"

namespace turboquant {

PlanReport Plan(const PlanRequest& request) {
  return detail::Translate([&] {
    if (request.context <= 0 || request.ram_gb < 0)
      throw Error(Error::Kind::kUsage, "[plan] context must be > 0 and ram_gb >= 0");
    tq::PlanOptions po;
    po.model_dir = request.path;
    po.context = request.context;
    if (request.ram_gb > 0) po.ram_gb = request.ram_gb;
    const tq::MemoryPlan p = tq::MakeMemoryPlan(po);
    PlanReport r;
    r.verdict = tq::PlanVerdictName(p.verdict);
    r.weights_bytes = p.memory.weights;
    r.kv_bytes = p.memory.kv;
    r.workspace_bytes = p.memory.workspace;
    r.reserve_bytes = p.memory.reserve;
    r.peak_bytes = p.memory.peak();
    r.usable_bytes = p.usable_bytes;
    r.max_context = p.max_context;
    return r;
  });
}

}  // namespace turboquant
