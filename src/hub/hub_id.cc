#include "hub/hub_id.h"

#include "core/error.h"

namespace tq::hub {
namespace {

constexpr size_t kMaxPart = 96;

bool IdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// Why `part` is not a valid org or name ("" when it is).
std::string PartProblem(const std::string& part) {
  if (part.empty()) return "is empty";
  if (part.size() > kMaxPart) return fmt::format("is longer than {} characters", kMaxPart);
  for (char c : part)
    if (!IdChar(c)) return fmt::format("holds '{}' (allowed: letters, digits, '.', '_', '-')", c);
  if (part.front() == '.' || part.front() == '-' || part.back() == '.' || part.back() == '-')
    return "starts or ends with '.' or '-'";
  if (part.find("--") != std::string::npos || part.find("..") != std::string::npos)
    return "holds '--' or '..'";
  return "";
}

std::string RevisionProblem(const std::string& rev) {
  if (rev.empty()) return "is empty";
  if (rev.size() > 255) return "is longer than 255 characters";
  for (char c : rev)
    if (!IdChar(c) && c != '/') return fmt::format("holds '{}'", c);
  if (rev.find("..") != std::string::npos || rev.front() == '/' || rev.back() == '/')
    return "holds '..' or starts or ends with '/'";
  return "";
}

// "" when `text` parses into `out`, else the problem.
std::string Parse(const std::string& text, HubId* out) {
  std::string id = text, rev;
  const size_t at = text.find('@');
  if (at != std::string::npos) {
    id = text.substr(0, at);
    rev = text.substr(at + 1);
    if (const std::string p = RevisionProblem(rev); !p.empty()) return "the revision " + p;
  }
  const size_t slash = id.find('/');
  if (slash == std::string::npos || id.find('/', slash + 1) != std::string::npos)
    return "expected ORG/NAME[@REVISION]";
  HubId h;
  h.org = id.substr(0, slash);
  h.name = id.substr(slash + 1);
  if (const std::string p = PartProblem(h.org); !p.empty()) return "the organization " + p;
  if (const std::string p = PartProblem(h.name); !p.empty()) return "the name " + p;
  if (at != std::string::npos) {
    h.revision = rev;
    h.revision_given = true;
  }
  *out = h;
  return "";
}

}  // namespace

std::optional<HubId> ParseHubId(const std::string& text) {
  HubId h;
  if (!Parse(text, &h).empty()) return std::nullopt;
  return h;
}

HubId ParseHubIdOrThrow(const std::string& text, const std::string& where) {
  HubId h;
  if (const std::string p = Parse(text, &h); !p.empty())
    throw UsageError(where, fmt::format("'{}' is not a hub id: {}", text, p));
  return h;
}

bool IsCommitHash(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace tq::hub
