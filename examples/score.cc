// Batch scoring: the total log-probability and perplexity of each line of a file.
//   tq_score MODEL_DIR FILE     -> "<logprob>\t<ppl>\t<line>" per non-empty line
#include <turboquant/turboquant.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR FILE\n", argv[0]);
    return 2;
  }
  try {
    auto model = turboquant::Model::Load(argv[1]);
    std::ifstream in(argv[2]);
    if (!in) {
      std::fprintf(stderr, "[tq_score] cannot open '%s'\n", argv[2]);
      return 1;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      const turboquant::Score s = model->ScoreText(line);
      const double ppl = std::exp(-s.total / double(s.logprobs.size()));
      std::printf("%.4f\t%.3f\t%s\n", s.total, ppl, line.c_str());
    }
  } catch (const turboquant::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return e.kind() == turboquant::Error::Kind::kUsage ? 2 : 1;
  }
  return 0;
}
