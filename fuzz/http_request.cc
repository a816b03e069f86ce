// Fuzzes the OpenAI request parser and validator (the part of the server that reads untrusted
// bytes beyond HTTP framing): any input must give a parsed request or an ApiError, never a
// crash, hang or sanitizer report. Parsed requests are also resolved and re-serialized.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/api_error.h"
#include "server/api_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  nlohmann::json j;
  try {
    j = tq::server::ParseJsonBody(body);
  } catch (const tq::server::ApiError& e) {
    (void)e.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return 0;
  }
  auto check = [&](auto parse) {
    try {
      auto r = parse(j);
      (void)r;
    } catch (const tq::server::ApiError& e) {
      if (e.status() != 400) __builtin_trap();
      (void)e.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  };
  check([](const nlohmann::json& b) {
    auto r = tq::server::ParseChatRequest(b);
    tq::SamplingParams d;
    (void)tq::server::ResolveSampling(r.sampling, d, 1);
    return r.messages.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  });
  check(
      [](const nlohmann::json& b) { return tq::server::ParseCompletionRequest(b).prompts.size(); });
  check([](const nlohmann::json& b) { return tq::server::ParseTokenizeRequest(b).text; });
  check([](const nlohmann::json& b) { return tq::server::ParseDetokenizeRequest(b).size(); });
  return 0;
}
