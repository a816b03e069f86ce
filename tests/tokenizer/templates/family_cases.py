"""Inputs for the family fixtures (<family>.jinja); make_expected.py renders them with jinja2."""
import json

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current local time (ISO 8601).",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": []},
        "return": {"type": "string"},
    },
}
TOOLS = [WEATHER_TOOL, TIME_TOOL]

BASIC = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi! How can I help?"},
    {"role": "user", "content": "Tell me a joke about café owners.  "},
]
NO_SYSTEM = [
    {"role": "user", "content": "Hello!"},
    {"role": "assistant", "content": "Hi!"},
    {"role": "user", "content": "Bye"},
]
BAD_ORDER = [
    {"role": "user", "content": "one"},
    {"role": "user", "content": "two"},
]


def call(name, args, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


TOOL_CHAT = [
    {"role": "system", "content": "Use tools when needed."},
    {"role": "user", "content": "Weather in Paris and the time in Tokyo?"},
    {"role": "assistant", "content": "",
     "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"}),
                    call("get_time", {"tz": "Asia/Tokyo"}, "call_2")]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
    {"role": "tool", "tool_call_id": "call_2", "content": "2024-07-26T10:00:00+09:00"},
    {"role": "assistant", "content": "Paris: 21°C and clear. Tokyo: 10:00."},
    {"role": "user", "content": "Thanks"},
]

FAMILIES = {
    "llama31": [
        {"name": "basic", "messages": BASIC, "add_generation_prompt": True},
        {"name": "no_system_no_prompt", "messages": NO_SYSTEM},
        {"name": "tools_in_user_message", "messages": [
            {"role": "system", "content": "  Sys  "},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Paris"})]},
            {"role": "tool", "content": {"temp": 21}},
            {"role": "ipython", "content": 42},
            {"role": "assistant", "content": "21 degrees."},
        ], "tools": TOOLS, "add_generation_prompt": True, "extra": {"date_string": "01 Jan 2025"}},
        {"name": "tools_in_system", "messages": NO_SYSTEM, "tools": [WEATHER_TOOL],
         "extra": {"tools_in_user_message": False}},
        {"name": "builtin_tools", "messages": [
            {"role": "user", "content": "Search for jinja"},
            {"role": "assistant", "tool_calls": [call("brave_search", {"query": "jinja", "count": "3"})]},
            {"role": "ipython", "content": "results..."},
        ], "add_generation_prompt": True,
         "extra": {"builtin_tools": ["brave_search", "code_interpreter", "wolfram_alpha"]}},
        {"name": "two_tool_calls_raise", "messages": TOOL_CHAT, "tools": TOOLS},
        {"name": "tools_without_user_raise", "messages": [{"role": "system", "content": "x"}],
         "tools": TOOLS},
    ],
    "qwen25": [
        {"name": "basic", "messages": BASIC, "add_generation_prompt": True},
        {"name": "default_system", "messages": NO_SYSTEM},
        {"name": "tools", "messages": TOOL_CHAT, "tools": TOOLS, "add_generation_prompt": True},
        {"name": "tools_default_system", "messages": TOOL_CHAT[1:], "tools": [WEATHER_TOOL]},
        {"name": "tool_first_message", "messages": [
            {"role": "tool", "content": "orphan"}, {"role": "user", "content": "ok"}]},
    ],
    "qwen3": [
        {"name": "basic", "messages": BASIC, "add_generation_prompt": True},
        {"name": "no_thinking", "messages": NO_SYSTEM, "add_generation_prompt": True,
         "extra": {"enable_thinking": False}},
        {"name": "reasoning", "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "<think>\nsimple\n</think>\n\n4"},
            {"role": "user", "content": "3+3?"},
            {"role": "assistant", "content": "6", "reasoning_content": "\nadd them\n"},
        ]},
        {"name": "multi_step_tools", "messages": [
            {"role": "system", "content": "Sys"},
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "<think>need tool</think>Let me check.",
             "tool_calls": [call("get_weather", {"city": "Paris"}),
                            {"name": "get_time", "arguments": "{\"tz\": \"UTC\"}"}]},
            {"role": "tool", "content": "sunny"},
            {"role": "tool", "content": "noon"},
            {"role": "user", "content": "<tool_response>\nextra\n</tool_response>"},
            {"role": "assistant", "content": "<think>\nall done\n</think>\n\nSunny at noon."},
        ], "tools": TOOLS, "add_generation_prompt": True},
        {"name": "content_parts_ignored", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "ignored"}]},
            {"role": "assistant", "content": None, "tool_calls": [call("get_time", {})]},
        ]},
    ],
    "mistral": [
        {"name": "basic", "messages": BASIC},
        {"name": "no_system", "messages": NO_SYSTEM},
        {"name": "bad_order_raise", "messages": BAD_ORDER},
        {"name": "system_only_in_last_user", "messages": [
            {"role": "system", "content": "Be short."},
            {"role": "user", "content": "a"}, {"role": "assistant", "content": " b "},
            {"role": "user", "content": "c"}]},
        {"name": "tools", "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Paris"}, "abcdefghi")]},
            {"role": "tool", "tool_call_id": "abcdefghi", "content": "sunny"},
            {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": "And now?"},
        ], "tools": TOOLS},
        {"name": "bad_call_id_raise", "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Paris"}, "short")]},
        ]},
        {"name": "unknown_role_raise", "messages": [{"role": "narrator", "content": "x"}]},
    ],
    "gemma": [
        {"name": "basic", "messages": BASIC, "add_generation_prompt": True},
        {"name": "parts", "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Sys parts"}]},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": " What is this? "}]},
        ], "add_generation_prompt": True},
        {"name": "bad_order_raise", "messages": BAD_ORDER},
        {"name": "invalid_content_raise", "messages": [{"role": "user", "content": 5}]},
    ],
    "phi3": [
        {"name": "generation_prompt", "messages": BASIC, "add_generation_prompt": True},
        {"name": "eos_at_end", "messages": NO_SYSTEM},
        {"name": "empty_system_skipped", "messages": [{"role": "system", "content": ""}] + NO_SYSTEM},
    ],
    "deepseek": [
        {"name": "basic", "messages": [
            {"role": "system", "content": "S1"}, {"role": "system", "content": "S2"},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "<think>hmm</think>Hello!"},
            {"role": "user", "content": "Again"}], "add_generation_prompt": True},
        {"name": "tools", "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                call("get_weather", "{\"city\": \"Paris\"}"), call("get_time", "{}")]},
            {"role": "tool", "content": "sunny"},
            {"role": "tool", "content": "noon"},
            {"role": "assistant", "content": "Sunny at noon."},
            {"role": "user", "content": "ok"}], "add_generation_prompt": True},
        {"name": "ends_in_tool", "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Checking", "tool_calls": [
                call("get_weather", "{\"city\": \"Rome\"}")]},
            {"role": "tool", "content": "rain"}], "add_generation_prompt": True},
    ],
}

SPECIAL_TOKENS = {
    "llama31": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen25": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen3": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "mistral": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "gemma": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
    "phi3": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "deepseek": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
}

RICH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for."},
                "limit": {"type": "integer", "default": 5},
                "tags": {"type": "array", "items": {"type": "string"}},
                "weights": {"type": "array", "items": {"type": "number"}},
                "filters": {"type": "object", "additionalProperties": {"type": "boolean"},
                            "properties": {"lang": {"type": "string", "enum": ["en", "fr"]}},
                            "required": ["lang"]},
                "mode": {"type": ["string", "null"], "enum": ["fast", "deep"], "default": "fast"},
                "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            },
            "required": ["query"],
        },
        "return": {"type": "array", "items": {"type": "string"}, "description": "Result URLs."},
    },
}
NO_ARGS_TOOL = {"type": "function", "function": {
    "name": "now", "description": "Current time.", "parameters": {"type": "object", "properties": {}}}}

# The Hermes macro recurses forever on a "null" member of a type union (it iterates the string's
# characters); jinja2 raises RecursionError there and so must we.
HERMES_TOOL = json.loads(json.dumps(RICH_TOOL))
HERMES_TOOL["function"]["parameters"]["properties"]["mode"]["type"] = ["string", "integer"]

FAMILIES["hermes"] = [
    {"name": "tools", "messages": TOOL_CHAT[1:], "tools": [HERMES_TOOL, NO_ARGS_TOOL, WEATHER_TOOL],
     "add_generation_prompt": True},
    {"name": "null_union_recursion_raise", "messages": TOOL_CHAT[1:2], "tools": [RICH_TOOL]},
    {"name": "string_arguments", "messages": [
        {"role": "user", "content": "now?"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "now", "arguments": "{}"}}]},
        {"role": "tool", "content": "noon"}], "tools": [NO_ARGS_TOOL]},
]
FAMILIES["harmony"] = [
    {"name": "tools", "messages": [
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "Search cats"},
        {"role": "assistant", "thinking": "Need search.", "tool_calls": [call("search", {"query": "cats", "limit": 2})]},
        {"role": "tool", "content": "[\"a\", \"b\"]"},
        {"role": "assistant", "content": "Deux résultats."},
        {"role": "user", "content": "Merci"}],
     "tools": [RICH_TOOL, NO_ARGS_TOOL], "add_generation_prompt": True,
     "extra": {"date_string": "2025-08-05", "reasoning_effort": "high"}},
    {"name": "final_with_thinking", "messages": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello", "thinking": "greet"}],
     "extra": {"date_string": "2025-08-05"}},
    {"name": "orphan_tool_raise", "messages": [{"role": "tool", "content": "x"}],
     "extra": {"date_string": "2025-08-05"}},
]
SPECIAL_TOKENS["hermes"] = {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"}
SPECIAL_TOKENS["harmony"] = {"eos_token": "<|return|>"}
