// A streaming chat loop: each line of stdin is a user turn; the reply streams to stdout. The
// conversation is kept, so the model sees every earlier turn.
//   tq_chat MODEL_DIR [MAX_TOKENS]
#include <turboquant/turboquant.h>

#include <cstdio>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    auto model = turboquant::Model::Load(argv[1]);
    turboquant::GenerateOptions opts;
    opts.max_tokens = argc > 2 ? std::stoll(argv[2]) : 128;
    std::vector<turboquant::Message> conversation;
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.empty()) continue;
      conversation.push_back({"user", line});
      const turboquant::GenerateResult r =
          model->Chat(conversation, opts, [](std::string_view piece) {
            std::fwrite(piece.data(), 1, piece.size(), stdout);
            std::fflush(stdout);
            return true;  // returning false would cancel the reply
          });
      std::printf("\n[%lld tokens, %s, %.1f tok/s]\n", (long long)r.tokens.size(),
                  r.finish_reason.c_str(), r.decode_tokens_per_second);
      conversation.push_back({"assistant", r.text});
    }
  } catch (const turboquant::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.kind() == turboquant::Error::Kind::kUsage ? 2 : 1;
  }
  return 0;
}
