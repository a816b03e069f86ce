#include "server/tool_grammar.h"

#include <fmt/format.h>

#include "runtime/grammar/json_schema.h"

namespace tq::server {

using grammar::GrammarBuilder;
using grammar::Sequence;
using grammar::Symbol;
using json = nlohmann::ordered_json;

grammar::Grammar ToolCallGrammar(ToolFamily family, const json& tools,
                                 const std::vector<size_t>& only) {
  GrammarBuilder b;
  grammar::JsonSchemaCompiler c(b);
  // Text around one call: before the name, between name and arguments, after the arguments.
  std::string pre, mid, post;
  std::vector<std::string> specials;
  const std::string args_key = family == ToolFamily::kLlama3 ? "parameters" : "arguments";
  auto json_call = [&](const std::string& prefix, const std::string& suffix) {
    pre = prefix + "{\"name\": \"";
    mid = "\", \"" + args_key + "\": ";
    post = "}" + suffix;
  };
  switch (family) {
    case ToolFamily::kHermes:
      json_call("<tool_call>\n", "\n</tool_call>");
      specials = {"<tool_call>", "</tool_call>"};
      break;
    case ToolFamily::kMistral:
      json_call("[TOOL_CALLS][", "]");
      specials = {"[TOOL_CALLS]"};
      break;
    case ToolFamily::kHarmony:
      pre = "<|channel|>commentary to=functions.";
      mid = " <|constrain|>json<|message|>";
      post = "";  // then end of sequence: <|call|> is one of gpt-oss's end tokens
      specials = {"<|channel|>", "<|constrain|>", "<|message|>"};
      break;
    case ToolFamily::kDeepSeek:
      pre = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>";
      mid = "\n```json\n";
      post = "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
      specials = {"<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                  "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"};
      break;
    default:  // llama3, json, none: the bare JSON object
      json_call("", "");
      break;
  }
  std::vector<Sequence> alts;
  for (size_t i : only) {
    const json& fn = tools.at(i).at("function");
    const std::string name = fn.at("name").get<std::string>();
    uint32_t args;
    auto p = fn.find("parameters");
    if (p == fn.end() || p->is_null()) {
      args = c.AnyObject();
    } else {
      args = c.Compile(*p, *p, fmt::format("tools[{}].function.parameters", i));
    }
    Sequence seq = GrammarBuilder::Literal(pre + name + mid);
    seq.push_back(Symbol::Rule(args));
    GrammarBuilder::Append(seq, GrammarBuilder::Literal(post));
    alts.push_back(std::move(seq));
  }
  return b.Build(b.RuleOf("tool_call", std::move(alts)), specials);
}

}  // namespace tq::server
