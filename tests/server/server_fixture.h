// A served fake model over loopback (fake engine + byte-level fake tokenizer), for the tests of
// the agent-facing API (tools, structured output, n, logprobs).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "fake_engine.h"
#include "fake_text_model.h"
#include "server/http_server.h"

namespace tq::server::test {

class ServerFixture : public ::testing::Test {
 protected:
  void Start(ServerOptions o = {}) {
    engine_ = std::make_unique<FakeEngine>(FakeTextModel::kVocab, 1024, 6);
    scheduler_ =
        std::make_unique<Scheduler>(*engine_, SchedulerOptions{.parallel = 4, .max_queue = 16});
    o.port = 0;
    o.model_id = "fake-model";
    o.context = 1024;
    server_ = std::make_unique<HttpServer>(text_, *scheduler_, o);
    port_ = server_->Bind();
    thread_ = std::thread([this] { server_->Serve(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(20);
  }
  void TearDown() override {
    if (scheduler_) scheduler_->Stop();
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Result Post(const std::string& body) {
    return client_->Post("/v1/chat/completions", body, "application/json");
  }
  nlohmann::json PostOk(const std::string& body) {
    auto r = Post(body);
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    return nlohmann::json::parse(r->body);
  }
  static std::vector<nlohmann::json> Events(const std::string& sse) {
    std::vector<nlohmann::json> out;
    size_t pos = 0;
    while (pos < sse.size()) {
      const size_t end = sse.find("\n\n", pos);
      if (end == std::string::npos) break;
      const std::string data = sse.substr(pos + 6, end - pos - 6);
      out.push_back(data == "[DONE]" ? nlohmann::json("[DONE]") : nlohmann::json::parse(data));
      pos = end + 2;
    }
    return out;
  }
  // 400 whose error names `param` and whose message contains `words`.
  void Expect400(const std::string& body, const std::string& param, const std::string& words) {
    auto r = Post(body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body << " -> " << r->body;
    const auto j = nlohmann::json::parse(r->body);
    EXPECT_EQ(j["error"]["param"], param) << r->body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(words), std::string::npos) << r->body;
  }

  FakeTextModel text_;
  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace tq::server::test
