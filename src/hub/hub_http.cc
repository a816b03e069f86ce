#include "hub/hub_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

#include "core/error.h"

namespace tq::hub {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  HttpResponse* resp = nullptr;
  const BodySink* sink = nullptr;
  const StartHook* on_start = nullptr;
  std::atomic<int64_t>* counter = nullptr;
  bool stopped = false, started = false;
  std::string refused;  // what on_start said
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    HttpHop hop;
    const size_t sp = line.find(' ');
    if (sp != std::string::npos) hop.status = std::strtol(line.c_str() + sp + 1, nullptr, 10);
    // 1xx interim answers (100 Continue) are not hops.
    if (hop.status >= 200 || hop.status == 0) t->resp->hops.push_back(std::move(hop));
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon != std::string::npos && !t->resp->hops.empty()) {
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
      value.pop_back();
    t->resp->hops.back().headers[Lower(line.substr(0, colon))] = value;
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  long status = 0;
  if (!t->resp->hops.empty()) status = t->resp->hops.back().status;
  t->resp->body_bytes += int64_t(bytes);
  *t->counter += int64_t(bytes);
  if (status < 200 || status >= 300) {
    std::string& eb = t->resp->error_body;
    eb.append(data, std::min(4096 - std::min<size_t>(4096, eb.size()), bytes));
    return bytes;
  }
  if (!t->started) {
    t->started = true;
    if (*t->on_start) {
      t->resp->status = status;
      t->refused = (*t->on_start)(*t->resp);
      if (!t->refused.empty()) {
        t->stopped = true;
        return 0;
      }
    }
  }
  if (!(*t->sink)(data, bytes)) {
    t->stopped = true;
    return 0;  // curl aborts with CURLE_WRITE_ERROR
  }
  return bytes;
}

[[noreturn]] void ThrowTransport(const std::string& where, const std::string& what) {
  throw HttpTransportError(where, what);
}

struct Easy {
  CURL* h;
  curl_slist* headers = nullptr;
  Easy() : h(curl_easy_init()) {}
  ~Easy() {
    curl_slist_free_all(headers);
    if (h) curl_easy_cleanup(h);
  }
};

}  // namespace

std::string HttpResponse::Header(const std::string& name) const {
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    const auto f = it->headers.find(name);
    if (f != it->headers.end()) return f->second;
  }
  return "";
}

HttpClient::HttpClient(HttpSettings settings) : s_(std::move(settings)) { GlobalInit(); }

HttpResponse HttpClient::Get(const std::string& url, ByteRange range, const BodySink& sink,
                             const StartHook& on_start) {
  const std::string where = "hub GET " + url;
  Easy e;
  TQ_CHECK(e.h, where, "curl_easy_init failed");
  HttpResponse resp;
  Transfer t;
  t.resp = &resp;
  t.sink = &sink;
  t.on_start = &on_start;
  t.counter = &body_bytes_;
  curl_easy_setopt(e.h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e.h, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(e.h, CURLOPT_MAXREDIRS, long(s_.max_redirects));
  curl_easy_setopt(e.h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e.h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e.h, CURLOPT_CONNECTTIMEOUT, s_.connect_timeout_s);
  curl_easy_setopt(e.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(e.h, CURLOPT_LOW_SPEED_TIME, s_.stall_timeout_s);
  curl_easy_setopt(e.h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e.h, CURLOPT_USERAGENT, s_.user_agent.c_str());
  curl_easy_setopt(e.h, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(e.h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(e.h, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(e.h, CURLOPT_WRITEDATA, &t);
  // The file bytes as stored: no transparent compression (sizes and hashes are of the bytes).
  e.headers = curl_slist_append(e.headers, "Accept-Encoding: identity");
  // curl drops a custom Authorization header when a redirect leaves the host (CDN links are
  // signed URLs): the token never reaches a third party.
  if (!s_.token.empty())
    e.headers = curl_slist_append(e.headers, ("Authorization: Bearer " + s_.token).c_str());
  curl_easy_setopt(e.h, CURLOPT_HTTPHEADER, e.headers);
  std::string range_text;
  if (range.begin >= 0) {
    range_text = range.end >= 0 ? fmt::format("{}-{}", range.begin, range.end)
                                : fmt::format("{}-", range.begin);
    curl_easy_setopt(e.h, CURLOPT_RANGE, range_text.c_str());
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(e.h, CURLOPT_ERRORBUFFER, errbuf);
  const CURLcode rc = curl_easy_perform(e.h);
  long status = 0;
  curl_easy_getinfo(e.h, CURLINFO_RESPONSE_CODE, &status);
  resp.status = status;
  char* eff = nullptr;
  curl_easy_getinfo(e.h, CURLINFO_EFFECTIVE_URL, &eff);
  resp.url = eff ? eff : url;
  if (rc != CURLE_OK) {
    if (!t.refused.empty()) Fail(where, "{}", t.refused);
    if (t.stopped) Fail(where, "stopped after {} bytes", resp.body_bytes);
    const std::string detail = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    switch (rc) {
      case CURLE_TOO_MANY_REDIRECTS:
        Fail(where, "more than {} redirects ({})", s_.max_redirects, detail);
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
        ThrowTransport(where, fmt::format("cannot connect ({}); set HF_ENDPOINT for a mirror, or "
                                          "HF_HUB_OFFLINE=1 to use only the local cache",
                                          detail));
      case CURLE_PARTIAL_FILE:
        ThrowTransport(
            where, fmt::format("the connection closed after {} bytes of the body, before its end "
                               "({})",
                               resp.body_bytes, detail));
      case CURLE_OPERATION_TIMEDOUT:
        ThrowTransport(where,
                       fmt::format("timed out after {} bytes ({})", resp.body_bytes, detail));
      case CURLE_RECV_ERROR:
      case CURLE_SEND_ERROR:
      case CURLE_GOT_NOTHING:
        ThrowTransport(where, fmt::format("{} (after {} body bytes)", detail, resp.body_bytes));
      default:
        Fail(where, "{} (after {} body bytes)", detail, resp.body_bytes);
    }
  }
  return resp;
}

HttpResponse HttpClient::GetText(const std::string& url, std::string* body, size_t max_bytes) {
  body->clear();
  HttpResponse r = Get(url, {}, [&](const char* d, size_t n) {
    if (body->size() + n > max_bytes) return false;
    body->append(d, n);
    return true;
  });
  return r;
}

std::string UrlEncode(const std::string& s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/');
    if (plain) {
      out += char(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace tq::hub
