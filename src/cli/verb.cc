#include "cli/verb.h"

#include <fmt/format.h>

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

// A flag error's message with any long value cut short: "--port = 99999999999999999999999..."
// would otherwise be echoed in full (numbers of 300 digits, pasted files).
std::string ShortenValues(const std::string& msg) {
  constexpr size_t kKeep = 24;
  std::string out;
  size_t i = 0;
  while (i < msg.size()) {
    size_t j = i;
    while (j < msg.size() && msg[j] != ' ' && msg[j] != '\n') ++j;
    if (j - i > 2 * kKeep) {
      out += msg.substr(i, kKeep) + fmt::format("...({} characters)", j - i);
    } else {
      out += msg.substr(i, j - i);
    }
    if (j < msg.size()) out += msg[j];
    i = j + 1;
  }
  return out;
}

// What a flag accepts, from its type and validators: "INT in [0 - 65535]".
std::string Accepted(const CLI::App& app, const std::string& message) {
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& n : o->get_lnames()) {
      if (message.find("--" + n) != std::string::npos) {
        const std::string type = o->get_type_name();
        if (!type.empty()) return fmt::format(" ({} accepts {})", o->get_name(), type);
      }
    }
  }
  return "";
}

// Set while ForEachVerbApp asks the verbs for their apps: RunApp hands the app over instead of
// parsing.
const std::function<void(const CLI::App&)>* g_describe = nullptr;

void ForEachVerbApp(const std::function<void(const Verb&, const CLI::App&)>& fn) {
  for (const Verb& v : Verbs()) {
    const std::function<void(const CLI::App&)> take = [&](const CLI::App& app) { fn(v, app); };
    g_describe = &take;
    std::string prog = "turboquant " + v.name;
    char* argv[] = {prog.data(), nullptr};
    v.run(1, argv);
    g_describe = nullptr;
  }
}

int RunApp(CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  if (g_describe) {
    (*g_describe)(app);
    return kExitOk;
  }
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
    std::string what = ShortenValues(e.what());
    if (dynamic_cast<const CLI::ConversionError*>(&e) ||
        dynamic_cast<const CLI::ValidationError*>(&e)) {
      what += Accepted(app, e.what());
    }
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", name.c_str(), what.c_str(),
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
