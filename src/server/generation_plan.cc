#include "server/generation_plan.h"

#include "runtime/grammar/json_schema.h"
#include "server/api_error.h"
#include "server/constrained_sampler.h"
#include "server/generation.h"
#include "server/openai_format.h"
#include "server/tool_grammar.h"

namespace tq::server {

GenerationPlan PlanGeneration(const GenerationRequest& r, const TextModel& text,
                              std::optional<ToolFamily> family) {
  GenerationPlan plan;
  if (r.endpoint != Endpoint::kChat) return plan;
  const bool has_tools = r.tools.is_array() && !r.tools.empty();
  const ToolFamily f = family ? *family : DetectToolFamily(text.ChatTemplateSource());
  if (has_tools && r.tool_choice != ToolChoice::kNone) plan.tools = f;
  try {
    if (has_tools &&
        (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction)) {
      std::vector<size_t> only;
      if (r.tool_choice == ToolChoice::kFunction) {
        only.push_back(r.tool_choice_index);
      } else {
        for (size_t i = 0; i < r.tools.size(); ++i) only.push_back(i);
      }
      std::string key = std::string("tools|") + ToolFamilyName(f) + "|" + Dump(r.tools) + "|";
      for (size_t i : only) key += std::to_string(i) + ",";
      plan.grammar = SharedMasker(text, key, ToolCallGrammar(f, r.tools, only));
      if (plan.tools == ToolFamily::kNone) plan.tools = f;
    } else if (r.response_format == ResponseFormat::kJsonObject) {
      plan.grammar = SharedMasker(text, "json_object", grammar::JsonObjectGrammar());
    } else if (r.response_format == ResponseFormat::kJsonSchema) {
      plan.grammar = SharedMasker(text, "schema|" + Dump(r.json_schema),
                                  grammar::SchemaGrammar(r.json_schema));
    }
  } catch (const grammar::SchemaError& e) {
    const bool tools =
        r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction;
    throw ApiError(400, "invalid_request_error", e.what(),
                   tools ? "tools" : "response_format.json_schema.schema",
                   e.keyword().empty() ? "invalid_schema" : "unsupported_schema_keyword");
  }
  return plan;
}

std::unique_ptr<TokenSampler> MakeSampler(const GenerationPlan& plan, const SamplingParams& params,
                                          const TextModel& text, std::span<const int32_t> prompt) {
  if (!plan.grammar) return std::make_unique<RuntimeSampler>(params, text.vocab_size(), prompt);
  return std::make_unique<ConstrainedSampler>(plan.grammar, params, text.vocab_size(), prompt,
                                              text.EosTokens());
}

}  // namespace tq::server
