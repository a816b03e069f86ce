// `turboquant tokenize -m DIR (-p STR | -f FILE|-) [--no-special]`: prints the ids as a JSON
// array, e.g. "[1, 697, 713]\n".
// `turboquant detokenize -m DIR --ids 1,2,3`: prints the decoded text (special tokens kept)
// followed by exactly one newline; an id outside the vocabulary is an error naming it.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/common_flags.h"
#include "cli/model_arg.h"
#include "cli/verb.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tq::cli {
namespace {

int RunTokenize(int argc, char** argv) {
  CLI::App app{"Encode text with a model's tokenizer.json; prints the ids as a JSON array.",
               argv[0]};
  std::string dir, text, file;
  bool no_special = false;
  AddModelFlag(app, &dir, "model directory (holds tokenizer.json)");
  auto* o_text = app.add_option("-p,--text,--prompt", text, "the text to encode");
  auto* o_file = app.add_option("-f,--prompt-file", file, "encode a file's text ('-' = stdin)");
  o_text->excludes(o_file);
  app.add_flag("--no-special", no_special, "do not add the tokenizer's special tokens (BOS...)");
  SetExamples(app,
              {"turboquant tokenize -m models/tq-llama-21m -p 'Hello world'",
               "cat notes.txt | turboquant tokenize -m models/tq-llama-21m -f - --no-special"});
  return RunApp(app, argc, argv, [&] {
    dir = ResolveModelDir(dir);
    if (!o_text->count() && !o_file->count())
      throw UsageError("tokenize", "give the text with --text (-p) or --prompt-file (-f)");
    if (o_file->count()) text = ReadPromptFile(file);
    const auto tok = Tokenizer::Load(dir);
    const std::vector<int32_t> ids = tok->Encode(text, !no_special);
    std::string out = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(ids[i]);
    }
    out += "]\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return kExitOk;
  });
}

// A value for an error message: at most 40 characters.
std::string Short(const std::string& s) {
  return s.size() <= 40 ? s : s.substr(0, 24) + fmt::format("...({} characters)", s.size());
}

// "1,2, 3" -> ids; anything else is a usage error.
std::vector<int32_t> ParseIds(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i) throw UsageError("--ids", "expected comma-separated ids, got '" + Short(s) + "'");
    if (j - i > 10 || std::stoll(s.substr(i, j - i)) > INT32_MAX)
      throw UsageError("--ids", fmt::format("id '{}' is out of range: ids are 0 to 2147483647",
                                            Short(s.substr(i, j - i))));
    const long long v = std::stoll(s.substr(i, j - i));
    ids.push_back(int32_t(v));
    while (j < s.size() && s[j] == ' ') ++j;
    if (j < s.size()) {
      if (s[j] != ',')
        throw UsageError("--ids", "expected comma-separated ids, got '" + Short(s) + "'");
      ++j;
      if (j == s.size()) throw UsageError("--ids", "trailing comma in '" + Short(s) + "'");
    }
    i = j;
  }
  return ids;
}

int RunDetokenize(int argc, char** argv) {
  CLI::App app{
      "Decode ids with a model's tokenizer.json (special tokens kept); prints the text "
      "and one newline.",
      argv[0]};
  std::string dir, ids_text;
  AddModelFlag(app, &dir, "model directory (holds tokenizer.json)");
  app.add_option("--ids", ids_text, "comma-separated token ids, e.g. 1,2,3")->required();
  SetExamples(app, {"turboquant detokenize -m models/tq-llama-21m --ids 1,15043,3186"});
  return RunApp(app, argc, argv, [&] {
    dir = ResolveModelDir(dir);
    const std::vector<int32_t> ids = ParseIds(ids_text);
    const auto tok = Tokenizer::Load(dir);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] >= tok->vocab_size())
        throw UsageError("--ids", fmt::format("id {} (position {}) is outside the vocabulary of "
                                              "{} tokens: ids are 0 to {}",
                                              ids[i], i, tok->vocab_size(), tok->vocab_size() - 1));
    }
    const std::string text = tok->Decode(ids, false) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  });
}

VerbRegistrar reg_tokenize("tokenize", "encode text to token ids (JSON array)", &RunTokenize);
VerbRegistrar reg_detokenize("detokenize", "decode token ids to text", &RunDetokenize);

}  // namespace
}  // namespace tq::cli
