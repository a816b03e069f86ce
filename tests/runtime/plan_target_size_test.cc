// plan --target-size: the whole converted file is at most the target (convert's guarantee, checked
// in TargetSize.WholeFileFitsChoosesTheEmbeddingAndLoads), so plan projects the weights at it; a
// target below every tensor at its cheapest is the usage error convert gives.
#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/plan/memory_plan.h"
#include "testutil/testutil.h"

namespace tq {
namespace {

PlanOptions Options(int64_t target) {
  PlanOptions o;
  o.model_dir = test::ModelDir("tq-llama-21m");
  o.recipe = QuantRecipeOptions{};
  o.target_bytes = target;
  o.context = 64;
  o.ram_gb = 64;
  return o;
}

TEST(PlanTargetSize, ProjectsTheTargetAsTheWeightsBound) {
  const MemoryPlan p = MakeMemoryPlan(Options(13'200'000));
  EXPECT_EQ(p.weights_bytes, 13'200'000);
  EXPECT_EQ(p.target_bytes, 13'200'000);
  EXPECT_EQ(p.unused_bytes, 0);
  EXPECT_NE(p.weights_source.find("--target-size"), std::string::npos) << p.weights_source;
}

TEST(PlanTargetSize, BelowTheSmallestFileIsAUsageError) {
  try {
    MakeMemoryPlan(Options(5'000'000));
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("smallest possible file"), std::string::npos) << e.what();
  }
  PlanOptions o = Options(13'200'000);
  o.recipe.reset();  // as stored: nothing to size
  EXPECT_THROW(MakeMemoryPlan(o), UsageError);
}

}  // namespace
}  // namespace tq
