// The `turboquant` binary is a set of verbs. Each verb lives in its own verb_<name>.cc and
// registers itself with a static VerbRegistrar; main.cc dispatches on argv[1] (or on the
// program name, for the installed `turboquant-<verb>` links).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace tq::cli {

// argv[0] is "turboquant <verb>"; returns the process exit code.
using VerbFn = int (*)(int argc, char** argv);

struct Verb {
  std::string name;
  std::string summary;
  VerbFn run;
};

struct VerbRegistrar {
  VerbRegistrar(const char* name, const char* summary, VerbFn run);
};

const std::vector<Verb>& Verbs();

// Exit codes shared by every verb.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;  // the work failed (bad file, does not fit, ...)
constexpr int kExitUsage = 2;    // bad flags or arguments

// Parses argv with `app`, then runs `body`. Maps errors to exit codes and messages on stderr:
// --help -> help on stdout, exit 0; a flag error -> "turboquant <verb>: <what>" + hint, exit 2;
// tq::UsageError -> exit 2; tq::Error / std::exception -> "turboquant <verb>: error: ..." exit 1.
int RunApp(CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// Calls `fn(verb, app)` with every verb's fully defined CLI::App (its options, descriptions,
// environment variables), without running any verb: the man page and shell completion are
// generated from the same definitions the parser uses (verb_completion.cc).
void ForEachVerbApp(const std::function<void(const Verb&, const CLI::App&)>& fn);

}  // namespace tq::cli
