// Fuzzes the chat-template engine: the input is a template, parsed and rendered (the way
// ChatTemplate renders, with tight limits) against a fixed conversation with tools. Any failure
// must be a tq::Error; crashes, hangs and other exceptions are bugs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "tokenizer/jinja/template.h"

namespace {

const tq::jinja::Dict& Vars() {
  static const tq::jinja::Dict vars = [] {
    const auto j = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris? ünïcödé"},
        {"role": "assistant", "content": "<think>x</think>ok", "reasoning_content": "r",
         "tool_calls": [{"id": "abcdefghi", "type": "function",
                         "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "abcdefghi", "content": "{\"temp\": 21}"},
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "and this?"}]}
      ],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "d",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
      "documents": null, "n": 3, "f": 1.5
    })");
    tq::jinja::Dict d;
    for (auto it = j.begin(); it != j.end(); ++it)
      d.Set(tq::jinja::Value(it.key()), tq::jinja::Value::FromJson(it.value()));
    return d;
  }();
  return vars;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  const std::string source(reinterpret_cast<const char*>(data), size);
  tq::jinja::TemplateOptions options;
  options.trim_blocks = options.lstrip_blocks = true;
  options.limits.max_steps = 20000;
  options.limits.max_output_bytes = 1 << 16;
  options.limits.max_call_depth = 32;
  try {
    const auto t = tq::jinja::Template::Parse(source, "fuzz", options);
    (void)t.Render(Vars());
  } catch (const tq::Error&) {
  }
  return 0;
}
