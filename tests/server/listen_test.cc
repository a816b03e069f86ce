// The listening socket: a taken port is an error naming it (no SO_REUSEPORT sharing), CORS
// headers only with --cors, and the one-line request log in text and JSON.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "fake_engine.h"
#include "fake_text_model.h"
#include "server/http_server.h"
#include "server/listen_socket.h"
#include "server/request_log.h"

namespace tq::server {
namespace {

struct Running {
  explicit Running(ServerOptions o) {
    engine = std::make_unique<test::FakeEngine>(test::FakeTextModel::kVocab, 64, 4);
    scheduler = std::make_unique<Scheduler>(*engine, SchedulerOptions{.parallel = 2});
    o.model_id = "fake-model";
    o.context = 64;
    server = std::make_unique<HttpServer>(text, *scheduler, o);
  }
  int Start() {
    port = server->Bind();
    thread = std::thread([this] { server->Serve(); });
    return port;
  }
  ~Running() {
    scheduler->Stop();
    server->Stop();
    if (thread.joinable()) thread.join();
  }
  test::FakeTextModel text;
  std::unique_ptr<test::FakeEngine> engine;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<HttpServer> server;
  std::thread thread;
  int port = 0;
};

TEST(Listen, SecondServerOnTheSamePortIsRefused) {
  ServerOptions o;
  o.port = 0;
  Running first(o);
  const int port = first.Start();
  o.port = port;
  Running second(o);
  try {
    second.server->Bind();
    FAIL() << "a second server bound port " << port;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("port " + std::to_string(port) + " is in use"), std::string::npos) << what;
  }
  // The first one still answers.
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(Listen, ReasonNamesTheProblem) {
  EXPECT_NE(BindFailureReason("192.0.2.1", 8080).find("not an address of this machine"),
            std::string::npos);
  EXPECT_NE(BindFailureReason("no-such-host.invalid", 8080).find("cannot resolve"),
            std::string::npos);
}

TEST(Listen, CorsOffByDefaultAndOnWithAnOrigin) {
  ServerOptions o;
  o.port = 0;
  {
    Running s(o);
    httplib::Client c("127.0.0.1", s.Start());
    auto r = c.Get("/health");
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
    auto pre = c.Options("/v1/chat/completions");
    ASSERT_TRUE(pre);
    EXPECT_FALSE(pre->has_header("Access-Control-Allow-Origin"));
  }
  o.cors_origin = "https://app.example";
  Running s(o);
  httplib::Client c("127.0.0.1", s.Start());
  auto r = c.Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  auto pre = c.Options("/v1/chat/completions");
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
}

TEST(Listen, UnknownLogFormatIsAnError) {
  ServerOptions o;
  o.log_format = "xml";
  EXPECT_THROW(Running{o}, std::exception);
}

TEST(RequestLog, TextAndJsonLines) {
  RequestLogLine l{.unix_ms = 1764622501123,
                   .method = "POST",
                   .path = "/v1/chat/completions",
                   .status = 200,
                   .prompt_tokens = 12,
                   .completion_tokens = 40,
                   .ms = 85.24};
  EXPECT_EQ(FormatRequestLog(l, LogFormat::kText),
            "2025-12-01T20:55:01.123Z POST /v1/chat/completions 200 prompt=12 completion=40 "
            "85.2ms");
  const auto j = nlohmann::json::parse(FormatRequestLog(l, LogFormat::kJson));
  EXPECT_EQ(j["status"], 200);
  EXPECT_EQ(j["completion_tokens"], 40);
  EXPECT_EQ(j["path"], "/v1/chat/completions");
  EXPECT_DOUBLE_EQ(j["ms"].get<double>(), 85.2);
  // A path with a newline stays on one line; invalid UTF-8 does not throw in JSON.
  l.path = "/a\nb";
  EXPECT_EQ(FormatRequestLog(l, LogFormat::kText).find('\n'), std::string::npos);
  l.path = "/\xff";
  EXPECT_NO_THROW(nlohmann::json::parse(FormatRequestLog(l, LogFormat::kJson)));
  LogFormat f;
  EXPECT_TRUE(ParseLogFormat("json", &f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_FALSE(ParseLogFormat("JSON!", &f));
}

TEST(RequestLog, TokensAndTimeOfTheThreadsRequest) {
  RequestLogBegin();
  RequestLogAddTokens(3, 5);
  RequestLogAddTokens(1, 2);
  RequestLogLine l;
  RequestLogFinish(&l);
  EXPECT_EQ(l.prompt_tokens, 4);
  EXPECT_EQ(l.completion_tokens, 7);
  EXPECT_GE(l.ms, 0);
  RequestLogLine again;
  RequestLogFinish(&again);  // cleared
  EXPECT_EQ(again.completion_tokens, 0);
}

}  // namespace
}  // namespace tq::server
