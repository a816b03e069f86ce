// What a chat request asks of the generation beyond sampling: which tool-call syntax to parse
// out of the text, and which grammar (if any) constrains the tokens. Built on the HTTP thread
// (grammar compilation and schema errors happen there, as 400s), used by the sinks and samplers.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "runtime/engine.h"
#include "runtime/grammar/token_mask.h"
#include "server/api_request.h"
#include "server/text_model.h"
#include "server/tool_calls.h"

namespace tq::server {

struct GenerationPlan {
  ToolFamily tools = ToolFamily::kNone;           // parse calls in this syntax (kNone: text)
  std::shared_ptr<grammar::TokenMasker> grammar;  // constrained decoding (null: free)
};

// `family`: the server's --tool-parser override, else read from the chat template. Throws
// ApiError 400 for a schema outside the supported subset (naming the keyword and where it is).
GenerationPlan PlanGeneration(const GenerationRequest& r, const TextModel& text,
                              std::optional<ToolFamily> family);

// The sampler for one choice: RuntimeSampler, or ConstrainedSampler when the plan has a grammar.
std::unique_ptr<TokenSampler> MakeSampler(const GenerationPlan& plan, const SamplingParams& params,
                                          const TextModel& text, std::span<const int32_t> prompt);

}  // namespace tq::server
