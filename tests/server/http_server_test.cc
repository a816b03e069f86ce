// The HTTP layer end to end over loopback, with a fake engine and byte-level fake tokenizer.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "fake_engine.h"
#include "fake_text_model.h"

namespace tq::server {
namespace {

using nlohmann::json;

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(int parallel = 2, int max_queue = 8, std::string api_key = "") {
    engine_ = std::make_unique<test::FakeEngine>(test::FakeTextModel::kVocab, 64, parallel + 2);
    scheduler_ = std::make_unique<Scheduler>(
        *engine_, SchedulerOptions{.parallel = parallel, .max_queue = max_queue});
    ServerOptions o;
    o.port = 0;
    o.model_id = "fake-model";
    o.context = 64;
    o.kv_cache = "K4V4 (test)";
    o.api_key = std::move(api_key);
    o.max_body_bytes = 16384;
    server_ = std::make_unique<HttpServer>(text_, *scheduler_, o);
    port_ = server_->Bind();
    thread_ = std::thread([this] { server_->Serve(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(10);
  }
  void TearDown() override {
    if (scheduler_) scheduler_->Stop();
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Result Post(const std::string& path, const std::string& body,
                       const httplib::Headers& h = {}) {
    return client_->Post(path.c_str(), h, body, "application/json");
  }
  static json Body(const httplib::Result& r) { return json::parse(r->body); }
  // The JSON payloads of "data: ..." events; "[DONE]" as the string "[DONE]".
  static std::vector<json> Events(const std::string& sse) {
    std::vector<json> out;
    size_t pos = 0;
    while (pos < sse.size()) {
      size_t end = sse.find("\n\n", pos);
      EXPECT_NE(end, std::string::npos) << "unterminated event in: " << sse;
      if (end == std::string::npos) break;
      std::string ev = sse.substr(pos, end - pos);
      EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
      std::string data = ev.substr(6);
      out.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
      pos = end + 2;
    }
    return out;
  }
  static void ExpectError(const httplib::Result& r, int status, const std::string& param = "") {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    json j = json::parse(r->body);
    ASSERT_TRUE(j.contains("error")) << r->body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
    EXPECT_TRUE(j["error"].contains("param"));
    EXPECT_TRUE(j["error"].contains("code"));
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r->body;
    }
  }

  test::FakeTextModel text_;
  std::unique_ptr<test::FakeEngine> engine_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, HealthAndModels) {
  Start();
  auto h = client_->Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = client_->Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(Body(m)["data"][0]["id"], "fake-model");
  EXPECT_EQ(Body(m)["object"], "list");
  ExpectError(client_->Get("/v1/models/other"), 404, "model");
  EXPECT_EQ(client_->Get("/v1/models/fake-model")->status, 200);
}

TEST_F(HttpServerTest, CompletionNonStreaming) {
  Start();
  auto r = Post("/v1/completions", R"({"model":"fake-model","prompt":"a","max_tokens":5})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = Body(r);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["text"], "bcdef");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
}

TEST_F(HttpServerTest, StopStringsAndEcho) {
  Start();
  auto r = Post("/v1/completions", R"({"prompt":"a","max_tokens":10,"stop":["de","zz"]})");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Body(r)["choices"][0]["text"], "bc");
  EXPECT_EQ(Body(r)["choices"][0]["finish_reason"], "stop");
  auto e = Post("/v1/completions", R"({"prompt":"x","max_tokens":2,"echo":true})");
  EXPECT_EQ(Body(e)["choices"][0]["text"], "xyz");
}

TEST_F(HttpServerTest, SeveralPromptsAndTokenPrompts) {
  Start();
  auto r = Post("/v1/completions", R"({"prompt":["a","k"],"max_tokens":2})");
  ASSERT_EQ(r->status, 200) << r->body;
  json j = Body(r);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], "bc");
  EXPECT_EQ(j["choices"][1]["text"], "lm");
  EXPECT_EQ(j["choices"][1]["index"], 1);
  auto t = Post("/v1/completions", R"({"prompt":[100],"max_tokens":2})");  // 100 = 'a'
  EXPECT_EQ(Body(t)["choices"][0]["text"], "bc");
}

TEST_F(HttpServerTest, ChatNonStreamingWithContentParts) {
  Start();
  auto r = Post("/v1/chat/completions",
                R"({"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],
                    "max_completion_tokens":3,"logprobs":true,"top_logprobs":2})");
  ASSERT_EQ(r->status, 200) << r->body;
  json j = Body(r);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], ";<=");  // after "A:" comes ";<="
  const json& lp = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 3u);
  EXPECT_EQ(lp[0]["token"], ";");
  EXPECT_LT(lp[0]["logprob"].get<double>(), 0.0);
  EXPECT_EQ(lp[0]["top_logprobs"].size(), 2u);
}

TEST_F(HttpServerTest, ChatStreamingFraming) {
  Start();
  auto r = Post("/v1/chat/completions",
                R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true,
                    "stream_options":{"include_usage":true}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  std::vector<json> ev = Events(r->body);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["object"], "chat.completion.chunk");
    EXPECT_TRUE(ev[i]["usage"].is_null());
    const json& c = ev[i]["choices"][0];
    if (c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(text, ";<=>");
  EXPECT_EQ(finish, "length");
  const json& usage = ev[ev.size() - 2];
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
}

TEST_F(HttpServerTest, CompletionStreamingStopsOnStopString) {
  Start();
  auto r = Post("/v1/completions", R"({"prompt":"a","max_tokens":20,"stream":true,"stop":"ef"})");
  ASSERT_EQ(r->status, 200);
  std::vector<json> ev = Events(r->body);
  std::string text, finish;
  for (const auto& e : ev) {
    if (e == "[DONE]") continue;
    text += e["choices"][0]["text"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "bcd");
  EXPECT_EQ(finish, "stop");
}

TEST_F(HttpServerTest, BadRequestsName) {
  Start();
  ExpectError(Post("/v1/chat/completions", "{not json"), 400);
  ExpectError(Post("/v1/chat/completions", "[1,2]"), 400);
  ExpectError(Post("/v1/chat/completions", R"({"messages":"hi"})"), 400, "messages");
  ExpectError(Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],
                   "temperature":"hot"})"),
              400, "temperature");
  ExpectError(Post("/v1/completions", R"({"prompt":"a","max_tokens":-1})"), 400, "max_tokens");
  ExpectError(Post("/v1/completions", R"({})"), 400, "prompt");
  ExpectError(Post("/v1/completions", R"({"prompt":[300]})"), 400, "prompt");
  ExpectError(Post("/v1/completions", R"({"prompt":"a","model":"gpt-4"})"), 404, "model");
  ExpectError(Post("/v1/nothing", "{}"), 404);
  ExpectError(client_->Get("/nothing"), 404);
  // Over the context (64 tokens): 400 naming the limit.
  auto r = Post("/v1/completions", json{{"prompt", std::string(100, 'a')}}.dump());
  ExpectError(r, 400, "prompt");
  EXPECT_NE(Body(r)["error"]["message"].get<std::string>().find("64"), std::string::npos);
  EXPECT_EQ(Body(r)["error"]["code"], "context_length_exceeded");
  // Over the body limit (16 KiB), sent at once or streamed in pieces.
  ExpectError(Post("/v1/completions", json{{"prompt", std::string(20000, 'a')}}.dump()), 413);
  const std::string big = json{{"prompt", std::string(20000, 'a')}}.dump();
  ExpectError(client_->Post(
                  "/v1/completions", big.size(),
                  [&](size_t off, size_t len, httplib::DataSink& sink) {
                    return sink.write(big.data() + off, std::min<size_t>(len, 1000));
                  },
                  "application/json"),
              413);
  // A body under the limit is read whatever its Content-Type (curl -d sends form-encoded):
  // here it gets as far as the context check.
  auto form = client_->Post("/v1/completions", json{{"prompt", std::string(10000, 'a')}}.dump(),
                            "application/x-www-form-urlencoded");
  ExpectError(form, 400, "prompt");
  // The server still answers.
  EXPECT_EQ(Post("/v1/completions", R"({"prompt":"a","max_tokens":1})")->status, 200);
}

TEST_F(HttpServerTest, ApiKey) {
  Start(2, 8, "sekret");
  ExpectError(client_->Get("/v1/models"), 401);
  ExpectError(client_->Get("/v1/models", {{"Authorization", "Bearer wrong"}}), 401);
  EXPECT_EQ(client_->Get("/v1/models", {{"Authorization", "Bearer sekret"}})->status, 200);
  EXPECT_EQ(client_->Get("/health")->status, 200);
  ExpectError(Post("/v1/completions", R"({"prompt":"a"})"), 401);
}

TEST_F(HttpServerTest, TokenizeAndDetokenize) {
  Start();
  auto t = Post("/tokenize", R"({"content":"ab"})");
  ASSERT_EQ(t->status, 200) << t->body;
  EXPECT_EQ(Body(t)["tokens"], json::parse("[0,100,101]"));
  auto n = Post("/tokenize", R"({"content":"ab","add_special":false})");
  EXPECT_EQ(Body(n)["tokens"], json::parse("[100,101]"));
  auto d = Post("/detokenize", R"({"tokens":[100,101]})");
  EXPECT_EQ(Body(d)["content"], "ab");
  ExpectError(Post("/detokenize", R"({"tokens":[9999]})"), 400, "tokens[0]");
  ExpectError(Post("/detokenize", R"({"tokens":"ab"})"), 400, "tokens");
}

TEST_F(HttpServerTest, MetricsExposition) {
  Start();
  Post("/v1/completions", R"({"prompt":"a","max_tokens":3})");
  // HTTP requests are counted once their response is sent: poll briefly.
  const std::string http_line =
      R"(turboquant_http_requests_total{endpoint="/v1/completions",status="200"} 1)";
  auto m = client_->Get("/metrics");
  for (int i = 0; i < 100 && m && m->body.find(http_line) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    m = client_->Get("/metrics");
  }
  ASSERT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("turboquant_generated_tokens_total 3"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("turboquant_requests_queued 0"), std::string::npos);
  EXPECT_NE(m->body.find("turboquant_kv_cache_usage_ratio"), std::string::npos);
  EXPECT_NE(m->body.find("turboquant_tokens_per_second"), std::string::npos);
  EXPECT_NE(m->body.find(R"x(turboquant_kv_cache_info{cache="K4V4 (test)"} 1)x"),
            std::string::npos);
  EXPECT_NE(m->body.find("turboquant_kv_cache_bytes_per_token "), std::string::npos);
  EXPECT_NE(m->body.find("turboquant_time_to_first_token_seconds_count 1"), std::string::npos);
  EXPECT_NE(m->body.find(http_line), std::string::npos) << m->body;
}

TEST_F(HttpServerTest, MetricsShowTheDeviceMemoryOnlyWhenOnADevice) {
  Start();
  auto m = client_->Get("/metrics");
  ASSERT_EQ(m->status, 200);
  EXPECT_EQ(m->body.find("turboquant_device_memory_bytes"), std::string::npos) << "host: none";
  engine_->fake_device = Engine::DeviceMemory{"cuda:0", 100 << 20, 150 << 20};
  m = client_->Get("/metrics");
  ASSERT_EQ(m->status, 200);
  EXPECT_NE(
      m->body.find(R"(turboquant_device_memory_bytes{device="cuda:0",state="used"} 52428800)"),
      std::string::npos)
      << m->body;
  EXPECT_NE(
      m->body.find(R"(turboquant_device_memory_bytes{device="cuda:0",state="total"} 157286400)"),
      std::string::npos);
  EXPECT_NE(m->body.find("# TYPE turboquant_device_memory_bytes gauge"), std::string::npos);
}

TEST_F(HttpServerTest, QueueFullIs503AndDisconnectFreesTheSlot) {
  Start(/*parallel=*/1, /*max_queue=*/1);
  engine_->decode_delay_us = 100000;  // 10 tokens/s: requests stay running for a while
  auto wait_for = [&](auto pred) {
    for (int i = 0; i < 500 && !pred(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pred();
  };
  // Two streaming clients that read until released, then hang up.
  std::atomic<bool> release{false};
  auto streamer = [&](std::atomic<int>& chunks) {
    httplib::Client c("127.0.0.1", port_);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.headers = {{"Content-Type", "application/json"}};
    req.body = R"({"prompt":"a","max_tokens":60,"stream":true})";
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
      return ++chunks < 3 || !release;
    };
    c.send(req);
  };
  std::atomic<int> c1{0}, c2{0};
  std::thread t1([&] { streamer(c1); });
  ASSERT_TRUE(wait_for([&] { return scheduler_->Stats().active == 1; }));
  std::thread t2([&] { streamer(c2); });
  ASSERT_TRUE(wait_for([&] { return scheduler_->Stats().queued == 1 || c2 > 0; }));
  if (scheduler_->Stats().queued == 1) {
    auto r = Post("/v1/completions", R"({"prompt":"a","max_tokens":1})");
    ExpectError(r, 503);
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  }
  release = true;
  t1.join();
  t2.join();
  // Both disconnected long before 1000 tokens: their slots are freed at the next step.
  ASSERT_TRUE(wait_for([&] {
    auto s = scheduler_->Stats();
    return s.active == 0 && s.queued == 0;
  }));
  EXPECT_EQ(scheduler_->Stats().finished_cancelled, 2);
  EXPECT_LT(scheduler_->Stats().generated_tokens_total, 1000);
  EXPECT_EQ(Post("/v1/completions", R"({"prompt":"a","max_tokens":2})")->status, 200);
}

}  // namespace
}  // namespace tq::server
