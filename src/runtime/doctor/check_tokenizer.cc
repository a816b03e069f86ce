// doctor: the tokenizer loads and round-trips a sample; the chat template renders one.
#include <filesystem>

#include "core/error.h"
#include "runtime/chat.h"
#include "runtime/doctor/doctor_checks.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace tq {
namespace {

// ASCII, punctuation, digits, accents, CJK and an emoji: every pre-tokenizer path.
constexpr const char* kSample = "Hello, world! The year 2024: naïve café, 日本語, emoji 🙂.";

// The text shown in a hint: at most 60 bytes (on a character boundary), newlines escaped.
std::string Quote(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < 60; ++i) {
    if (s[i] == '\n') {
      out += "\\n";
    } else {
      out += s[i];
    }
  }
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
  if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
  return "\"" + out + (out.size() < s.size() ? "...\"" : "\"");
}

}  // namespace

void CheckTokenizer(DoctorState& st) {
  const std::string& dir = st.opts.model_dir;
  if (!std::filesystem::exists(dir + "/tokenizer.json")) return;  // reported by CheckFiles
  try {
    st.tokenizer = Tokenizer::Load(dir);
  } catch (const Error& e) {
    st.Add(CheckStatus::kFail, "tokenizer", e.what());
    return;
  }
  const Tokenizer& tok = *st.tokenizer;
  if (st.config && tok.vocab_size() > st.config->vocab_size) {
    st.Add(CheckStatus::kFail, "tokenizer",
           fmt::format("ids up to {} but config.json's vocab_size is {}: a token could index "
                       "past the embedding",
                       tok.vocab_size() - 1, st.config->vocab_size));
    return;
  }
  const std::vector<int32_t> ids = tok.Encode(kSample, /*add_special_tokens=*/false);
  const std::string back = tok.Decode(ids);
  if (back == kSample) {
    st.Add(CheckStatus::kOk, "tokenizer",
           fmt::format("vocab {}; a {}-byte sample round-trips in {} tokens", tok.vocab_size(),
                       std::string(kSample).size(), ids.size()));
  } else {
    st.Add(CheckStatus::kWarn, "tokenizer",
           fmt::format("loads (vocab {}) but the sample decodes differently: {} -> {}",
                       tok.vocab_size(), Quote(kSample), Quote(back)));
  }

  TokenizerConfig tc;
  try {
    tc = LoadTokenizerConfig(dir);
  } catch (const Error& e) {
    st.Add(CheckStatus::kFail, "chat template", e.what());
    return;
  }
  if (tc.chat_template.empty() && tc.named_templates.empty()) {
    st.Add(CheckStatus::kWarn, "chat template",
           "none in tokenizer_config.json: --chat and /v1/chat/completions are unavailable");
    return;
  }
  nlohmann::json messages =
      nlohmann::json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}},
                             {{"role", "user"}, {"content", "Hello!"}},
                             {{"role", "assistant"}, {"content", "Hi! How can I help?"}},
                             {{"role", "user"}, {"content", "What is 2 + 2?"}}});
  std::string rendered, note;
  try {
    rendered = RenderChatPrompt(tc, messages);
  } catch (const Error& first) {
    // Some templates refuse a system message; that is the template's rule, not a fault.
    messages.erase(messages.begin());
    try {
      rendered = RenderChatPrompt(tc, messages);
      note = " (without the system message, which it rejects)";
    } catch (const Error&) {
      st.Add(CheckStatus::kFail, "chat template", first.what());
      return;
    }
  }
  if (rendered.find("What is 2 + 2?") == std::string::npos) {
    st.Add(CheckStatus::kFail, "chat template",
           fmt::format("renders, but without the user's message: {}", Quote(rendered)));
    return;
  }
  st.Add(CheckStatus::kOk, "chat template",
         fmt::format("renders a {}-message conversation{}: {} bytes, {} tokens", messages.size(),
                     note, rendered.size(), tok.Encode(rendered, false).size()));
}

}  // namespace tq
