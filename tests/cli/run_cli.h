// Runs the turboquant binary with shell-quoted arguments; captures stdout, stderr
// and the exit code.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "testutil/testutil.h"

namespace tq::test {

struct CliResult {
  int code;
  std::string out;  // stdout
  std::string err;  // stderr
};

// The binary under test: TQ_CLI_PATH where the test target defines it, else the build tree's.
inline std::string CliPath() {
#ifdef TQ_CLI_PATH
  return TQ_CLI_PATH;
#else
  return RequireFile(BinaryDir() + "/src/cli/turboquant");
#endif
}

// `env`: "NAME=value ..." set for this command only; `input`: its standard input (else none).
inline CliResult RunCli(const std::string& args, const std::string& env = "",
                        const std::string& input = "") {
  TempDir dir;
  const std::string err_file = dir.file("stderr");
  const std::string in_file = dir.file("stdin");
  WriteFile(in_file, input);
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + CliPath() + " " + args + " 2>" +
                          err_file + " <" + in_file;
  FILE* p = popen(cmd.c_str(), "r");
  CliResult r{-1, "", ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  FILE* e = fopen(err_file.c_str(), "r");
  while (e && (n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
  if (e) fclose(e);
  return r;
}

// 'text' for sh, with embedded single quotes escaped.
inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace tq::test
