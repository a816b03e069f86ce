// turboquant: one binary, many verbs (see DESIGN.md). `turboquant <verb> --help` for each.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/verb.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "turboquant %s: TurboQuant LLM inference (data-free 2/3/4-bit and ternary "
               "weights, compressed KV cache)\n\nUsage: turboquant <verb> [options]\n\nVerbs:\n",
               TQ_VERSION);
  auto verbs = tq::cli::Verbs();
  std::sort(verbs.begin(), verbs.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (const auto& v : verbs) std::fprintf(out, "  %-12s %s\n", v.name.c_str(), v.summary.c_str());
  std::fprintf(out,
               "\nRun 'turboquant help <verb>' (or 'turboquant <verb> --help') for the options of "
               "a verb.\nEnvironment: TURBOQUANT_MODEL, TURBOQUANT_THREADS, TURBOQUANT_ISA, "
               "TURBOQUANT_HOST, TURBOQUANT_PORT, TURBOQUANT_API_KEY, TURBOQUANT_LOG (README.md); "
               "a flag wins over its variable.\n");
}

int Dispatch(const std::string& verb, int argc, char** argv) {
  for (const auto& v : tq::cli::Verbs()) {
    if (v.name == verb) {
      std::string prog = "turboquant " + verb;
      std::vector<char*> args{prog.data()};
      for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
      return v.run(int(args.size()), args.data());
    }
  }
  std::fprintf(stderr, "turboquant: unknown verb '%s'\n\n", verb.c_str());
  PrintUsage(stderr);
  return tq::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  // Installed as turboquant-<verb>: the program name selects the verb.
  std::string self = argv[0];
  self = self.substr(self.find_last_of('/') + 1);
  if (self.rfind("turboquant-", 0) == 0) return Dispatch(self.substr(11), argc - 1, argv + 1);

  if (argc < 2) {
    PrintUsage(stderr);
    return tq::cli::kExitUsage;
  }
  const std::string first = argv[1];
  if (first == "help" && argc >= 3) {  // `turboquant help VERB` = `turboquant VERB --help`
    char help[] = "--help";
    char* args[] = {help};
    return Dispatch(argv[2], 1, args);
  }
  if (first == "--help" || first == "-h" || first == "help") {
    PrintUsage(stdout);
    return 0;
  }
  if (first == "--version") {
    std::printf("turboquant %s\n", TQ_VERSION);
    return 0;
  }
  return Dispatch(first, argc - 2, argv + 2);
}
