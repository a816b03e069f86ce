// Grammars for constrained tool calls (tool_choice "required" or a named function): one call in
// the family's own syntax (tool_calls.h) whose arguments match the function's parameters schema,
// so the parser always finds a well-formed call.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/grammar/grammar.h"
#include "server/tool_calls.h"

namespace tq::server {

// `tools`: the request's tools (validated: each {"type": "function", "function": {"name",
// "parameters"?}}); `only`: indices of the tools allowed (all for "required", one for a named
// choice). Throws grammar::SchemaError (path "tools[i].function.parameters...") for parameters
// outside the supported schema subset.
grammar::Grammar ToolCallGrammar(ToolFamily family, const nlohmann::ordered_json& tools,
                                 const std::vector<size_t>& only);

}  // namespace tq::server
