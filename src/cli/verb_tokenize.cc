// `turboquant tokenize --model DIR --text STR [--no-special]`: prints the ids as a JSON array,
// e.g. "[1, 697, 713]\n".
// `turboquant detokenize --model DIR --ids 1,2,3`: prints the decoded text (special tokens kept)
// followed by exactly one newline.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/model_arg.h"
#include "cli/verb.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tq::cli {
namespace {

int RunTokenize(int argc, char** argv) {
  CLI::App app{"Encode text with a model's tokenizer.json; prints the ids as a JSON array.",
               argv[0]};
  std::string dir, text;
  bool no_special = false;
  app.add_option("--model", dir, "model directory (holds tokenizer.json)")->required();
  app.add_option("--text", text, "the text to encode")->required();
  app.add_flag("--no-special", no_special, "do not add the tokenizer's special tokens (BOS...)");
  return RunApp(app, argc, argv, [&] {
    dir = ResolveModelDir(dir);
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

// "1,2, 3" -> ids; anything else is a usage error.
std::vector<int32_t> ParseIds(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j == i || j - i > 10)
      throw UsageError("--ids", "expected comma-separated ids, got '" + s + "'");
    const long long v = std::stoll(s.substr(i, j - i));
    if (v > INT32_MAX) throw UsageError("--ids", "id out of range: " + s.substr(i, j - i));
    ids.push_back(int32_t(v));
    while (j < s.size() && s[j] == ' ') ++j;
    if (j < s.size()) {
      if (s[j] != ',') throw UsageError("--ids", "expected comma-separated ids, got '" + s + "'");
      ++j;
      if (j == s.size()) throw UsageError("--ids", "trailing comma in '" + s + "'");
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
  app.add_option("--model", dir, "model directory (holds tokenizer.json)")->required();
  app.add_option("--ids", ids_text, "comma-separated token ids, e.g. 1,2,3")->required();
  return RunApp(app, argc, argv, [&] {
    dir = ResolveModelDir(dir);
    const std::vector<int32_t> ids = ParseIds(ids_text);
    const auto tok = Tokenizer::Load(dir);
    const std::string text = tok->Decode(ids, false) + "\n";
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  });
}

VerbRegistrar reg_tokenize("tokenize", "encode text to token ids (JSON array)", &RunTokenize);
VerbRegistrar reg_detokenize("detokenize", "decode token ids to text", &RunDetokenize);

}  // namespace
}  // namespace tq::cli
