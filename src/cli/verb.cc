#include "cli/verb.h"

#include <cstdio>
#include <exception>

#include "core/error.h"

namespace tq::cli {

static std::vector<Verb>& Registry() {
  static std::vector<Verb> verbs;
  return verbs;
}

VerbRegistrar::VerbRegistrar(const char* name, const char* summary, VerbFn run) {
  Registry().push_back({name, summary, run});
}

const std::vector<Verb>& Verbs() { return Registry(); }

int RunApp(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  const std::string name = app.get_name();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", name.c_str(), e.what(),
                 name.c_str());
    return kExitUsage;
  }
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", name.c_str(), e.what(),
                 name.c_str());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name.c_str(), e.what());
    return kExitFailure;
  }
}

}  // namespace tq::cli
