// `flashdesk-cli serve` as clients use it: a real server process on loopback and curl. Answers
// (plain, streamed, with an image), the KV reuse a resent history gets, stop sequences, errors as
// OpenAI-style objects, the API key, a client leaving mid-stream, and eight clients at once.
#ifdef FD_HAVE_SERVER
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/cli_runner.h"
#include "tests/integration/server_process.h"

namespace flashdesk::testing {
namespace {

using nlohmann::json;

const std::string kSource = FD_SOURCE_DIR;
const std::string kModelDir = kSource + "/assets/models/flash-tiny";
const std::string kModel = "flash-tiny";

json chat_body(json messages, json extra = json::object()) {
  json body = {{"model", kModel}, {"messages", std::move(messages)}};
  body.update(extra);
  return body;
}

json user(const std::string& text) {
  return {{"role", "user"}, {"content", text}};
}

json ask(const ServerProcess& server, const json& body) {
  const HttpReply r = server.request("/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body, nullptr, false);
}

struct StreamedAnswer {
  std::string reasoning, content, finish;
  json usage;
  bool done = false;            // ended with data: [DONE]
  bool reasoning_first = true;  // no reasoning after the first content
};

// Reads a server-sent event stream: the deltas of each channel, the finish reason, usage.
StreamedAnswer read_stream(const std::string& events) {
  StreamedAnswer a;
  size_t at = 0;
  while ((at = events.find("data: ", at)) != std::string::npos) {
    const size_t end = events.find("\n\n", at);
    const std::string data = events.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      a.done = true;
      continue;
    }
    const json chunk = json::parse(data);
    if (chunk.contains("usage") && !chunk["usage"].is_null()) a.usage = chunk["usage"];
    if (chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    const json& delta = choice["delta"];
    if (delta.contains("reasoning_content")) {
      a.reasoning += delta["reasoning_content"].get<std::string>();
      if (!a.content.empty()) a.reasoning_first = false;
    }
    if (delta.contains("content")) a.content += delta["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) a.finish = choice["finish_reason"];
  }
  return a;
}

TEST(ServeCli, ListsTheModelAndAnswers) {
  ServerProcess server(kModelDir);
  const HttpReply models = server.request("/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], kModel) << models.body;
  const HttpReply one = server.request("/v1/models/" + std::string(kModel));
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(json::parse(one.body), json::parse(models.body)["data"][0]) << one.body;
  const HttpReply other = server.request("/v1/models/deepseek-ai/other");
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(json::parse(other.body)["error"]["code"], "model_not_found") << other.body;

  const json a = ask(
      server, chat_body({user("Hi! My name is Quinn.")}, {{"thinking", {{"type", "disabled"}}}}));
  const json& message = a["choices"][0]["message"];
  EXPECT_NE(message["content"].get<std::string>().find("Quinn"), std::string::npos) << a;
  EXPECT_TRUE(message["reasoning_content"].is_null()) << a;
  EXPECT_EQ(a["choices"][0]["finish_reason"], "stop");
  const json& u = a["usage"];
  EXPECT_GT(u["prompt_tokens"].get<int>(), 5);
  EXPECT_GT(u["completion_tokens"].get<int>(), 0);
  EXPECT_EQ(u["total_tokens"], u["prompt_tokens"].get<int>() + u["completion_tokens"].get<int>());
  EXPECT_EQ(u["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(u["prompt_cache_miss_tokens"], u["prompt_tokens"]);
}

TEST(ServeCli, StreamsReasoningThenTheSameAnswer) {
  ServerProcess server(kModelDir);
  const json body = chat_body({user("What is 4821 + 3377?")}, {{"reasoning_effort", 50}});
  const json whole = ask(server, body);
  json streamed_body = body;
  streamed_body["stream"] = true;
  streamed_body["stream_options"] = {{"include_usage", true}};
  const HttpReply r = server.request("/v1/chat/completions", streamed_body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const StreamedAnswer s = read_stream(r.body);
  EXPECT_TRUE(s.done) << r.body;
  EXPECT_TRUE(s.reasoning_first);
  EXPECT_FALSE(s.reasoning.empty());
  EXPECT_FALSE(s.content.empty());
  EXPECT_EQ(s.finish, "stop");
  // Greedy decoding: the stream says what the whole answer said.
  EXPECT_EQ(s.content, whole["choices"][0]["message"]["content"]);
  EXPECT_EQ(s.reasoning, whole["choices"][0]["message"]["reasoning_content"]);
  EXPECT_EQ(s.usage["completion_tokens"], whole["usage"]["completion_tokens"]);
  EXPECT_GT(s.usage["completion_tokens_details"]["reasoning_tokens"].get<int>(), 0);
}

// Each turn resends the history; the live KV of the last turn serves all of it but the last
// token it never fed back (chat mode), or up to the previous prompt's <think> (thinking mode,
// whose answers' reasoning the next rendering drops).
TEST(ServeCli, ResentHistoryReusesTheLiveKv) {
  ServerProcess server(kModelDir);
  for (const bool thinking : {false, true}) {
    json messages = json::array({{{"role", "system"}, {"content", "You are helpful."}}});
    int previous_prompt = 0, previous_completion = 0;
    for (const char* text : {"Hi! My name is Quinn.", "What is 12 + 30?", "What is my name?"}) {
      messages.push_back(user(text));
      const json a =
          ask(server, chat_body(messages, thinking ? json{{"reasoning_effort", "low"}}
                                                   : json{{"thinking", {{"type", "disabled"}}}}));
      const json& u = a["usage"];
      const int cached = u["prompt_tokens_details"]["cached_tokens"];
      if (previous_prompt == 0)
        EXPECT_EQ(cached, 0);
      else if (thinking)
        EXPECT_EQ(cached, previous_prompt - 1) << a;
      else
        EXPECT_EQ(cached, previous_prompt + previous_completion - 1) << a;
      EXPECT_EQ(u["prompt_cache_hit_tokens"], cached);
      previous_prompt = u["prompt_tokens"];
      previous_completion = u["completion_tokens"];
      messages.push_back(
          {{"role", "assistant"}, {"content", a["choices"][0]["message"]["content"]}});
    }
    EXPECT_NE(messages.back()["content"].get<std::string>().find("Quinn"), std::string::npos)
        << messages;
  }
}

TEST(ServeCli, ReadsAnImageDataUrl) {
  ServerProcess server(kModelDir);
  const std::string image = kSource + "/assets/eval/demo/images/image-0.png";
  const std::string base64 = shell("base64 -w0 " + quoted(image));
  ASSERT_GT(base64.size(), 100u);
  const json content = json::array(
      {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64," + base64}}}},
       {{"type", "text"}, {"text", "What colour is the square?"}}});
  const json a = ask(server, chat_body({{{"role", "user"}, {"content", content}}},
                                       {{"thinking", {{"type", "disabled"}}}}));
  // What `generate --image` answers for the same picture and question.
  const auto cli = run_cli("generate --model " + kModelDir + " --image " + image +
                           " --prompt 'What colour is the square?' --thinking off --json");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  const json expected = json::parse(cli.output.substr(cli.output.find('{')));
  EXPECT_EQ(a["choices"][0]["message"]["content"], expected["answer"]) << a;
  EXPECT_EQ(a["usage"]["prompt_tokens"], expected["stats"]["prompt_tokens"]);
}

// curl -d sends a form's Content-Type; the body is read as JSON whatever the type says, past
// the 8 KiB httplib allows a form.
TEST(ServeCli, ReadsJsonWhateverTheContentType) {
  ServerProcess server(kModelDir);
  std::string long_text;
  for (int i = 0; i < 2000; ++i) long_text += "word ";
  const json body =
      chat_body({user(long_text)}, {{"max_tokens", 1}, {"thinking", {{"type", "disabled"}}}});
  ASSERT_GT(body.dump().size(), 8192u);
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain"}) {
    const HttpReply r = server.request("/v1/chat/completions", body.dump(),
                                       std::string("-H 'Content-Type: ") + type + "'");
    EXPECT_EQ(r.status, 200) << type << ": " << r.body;
  }
}

TEST(ServeCli, StopSequenceCutsTheAnswer) {
  ServerProcess server(kModelDir);
  const json plain = ask(
      server, chat_body({user("Hi! My name is Quinn.")}, {{"thinking", {{"type", "disabled"}}}}));
  const std::string full = plain["choices"][0]["message"]["content"];
  const size_t at = full.find("Quinn");
  ASSERT_NE(at, std::string::npos) << full;
  const json cut =
      ask(server, chat_body({user("Hi! My name is Quinn.")},
                            {{"thinking", {{"type", "disabled"}}}, {"stop", {"Quinn"}}}));
  EXPECT_EQ(cut["choices"][0]["message"]["content"], full.substr(0, at)) << cut;
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
  const json length = ask(server, chat_body({user("What is 4821 + 3377?")}, {{"max_tokens", 3}}));
  EXPECT_EQ(length["choices"][0]["finish_reason"], "length") << length;
  EXPECT_EQ(length["usage"]["completion_tokens"], 3);
}

// Every refusal is {"error": {"message", "type", "param", "code"}} with a 4xx status.
TEST(ServeCli, RefusesBadRequestsWithErrorObjects) {
  ServerProcess server(kModelDir, {"--max-request-mb", "1"});
  const auto expect_error = [&](const std::string& path, const std::string& body, int status,
                                const std::string& param) {
    const HttpReply r = server.request(path, body);
    EXPECT_EQ(r.status, status) << body << " -> " << r.body;
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
    EXPECT_TRUE(j["error"].contains("type") && j["error"].contains("code"));
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r.body;
    }
  };
  const std::string chat = "/v1/chat/completions";
  expect_error(chat, "{\"model\": ", 400, "");
  expect_error(chat, chat_body({user("hi")}, {{"temprature", 1}}).dump(), 400, "temprature");
  expect_error(chat, chat_body({user("hi")}, {{"temperature", 3}}).dump(), 400, "temperature");
  expect_error(chat, chat_body({user("hi")}, {{"max_tokens", 0}}).dump(), 400, "max_tokens");
  expect_error(chat, chat_body({user("hi")}, {{"reasoning_effort", "extreme"}}).dump(), 400,
               "reasoning_effort");
  expect_error(chat, chat_body({user("hi")}, {{"n", 2}}).dump(), 400, "n");
  expect_error(chat, chat_body(json::array()).dump(), 400, "messages");
  expect_error(chat, chat_body({{{"role", "assistant"}, {"content", "hi"}}}).dump(), 400,
               "messages");
  expect_error(chat, chat_body({{{"role", "tool"}, {"content", "hi"}}}).dump(), 400,
               "messages[0].role");
  const json remote_image = {
      {{"role", "user"},
       {"content",
        {{{"type", "image_url"}, {"image_url", {{"url", "https://example.com/a.png"}}}}}}}};
  expect_error(chat, chat_body(remote_image).dump(), 400, "messages[0].content[0].image_url");
  const json bad_image = {
      {{"role", "user"},
       {"content",
        {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,aGVsbG8="}}}}}}}};
  expect_error(chat, chat_body(bad_image).dump(), 400, "messages[0].content[0]");
  json wrong_model = chat_body({user("hi")});
  wrong_model["model"] = "gpt-4o";
  expect_error(chat, wrong_model.dump(), 404, "model");
  expect_error("/v1/completions", chat_body({user("hi")}).dump(), 404, "");
  expect_error(chat, chat_body({user(std::string(2 << 20, 'a'))}).dump(), 413, "");
  const HttpReply chunked = server.request(
      chat, chat_body({user(std::string(2 << 20, 'a'))}).dump(), "-H 'Transfer-Encoding: chunked'");
  EXPECT_EQ(chunked.status, 413) << chunked.body;
  // The server still answers after all of them.
  EXPECT_EQ(server.request("/v1/models").status, 200);
}

TEST(ServeCli, NeedsTheApiKeyWhenGivenOne) {
  const auto refused = run_cli("serve --model " + kModelDir + " --host 0.0.0.0 --port 0");
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("needs --api-key"), std::string::npos) << refused.output;

  ServerProcess server(kModelDir, {"--api-key", "sesame-42"});
  EXPECT_EQ(server.request("/v1/models").status, 401);
  EXPECT_EQ(server.request("/v1/models", {}, "-H 'Authorization: Bearer sesame-4'").status, 401);
  EXPECT_EQ(server.request("/v1/models", {}, "-H 'Authorization: Bearer sesame-421'").status, 401);
  const HttpReply ok = server.request("/v1/models", {}, "-H 'Authorization: Bearer sesame-42'");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(server.request("/v1/models").body)["error"]["code"], "invalid_api_key");
}

// SIGTERM stops the server cleanly, even the moment it has started listening.
TEST(ServeCli, StopsOnSigtermEvenRightAfterStart) {
  for (int i = 0; i < 3; ++i) {
    ServerProcess server(kModelDir);
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
}

// A client that closes the stream stops its generation: the server logs it, long before the
// token budget, and answers the next client.
TEST(ServeCli, ClientLeavingMidStreamStopsGeneration) {
  ServerProcess server(kModelDir);
  const json body = chat_body({user("Write a very long story about a dragon.")},
                              {{"stream", true},
                               {"max_tokens", 100000},
                               {"ignore_eos", true},  // long enough with any model
                               {"reasoning_effort", "max"},
                               {"thinking", {{"type", "enabled"}}},
                               {"temperature", 1.0}});
  shell("printf '%s' " + quoted(body.dump()) +
        " | curl -sS -N -H 'Content-Type: application/json' " + "--data-binary @- " +
        quoted(server.url("/v1/chat/completions")) + " 2>/dev/null | head -c 3000 >/dev/null");
  std::string log;
  for (int i = 0; i < 100 && log.find("client gone") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = server.log();
  }
  EXPECT_NE(log.find("(client gone)"), std::string::npos) << log;
  const json a = ask(
      server, chat_body({user("Hi! My name is Quinn.")}, {{"thinking", {{"type", "disabled"}}}}));
  EXPECT_NE(a["choices"][0]["message"]["content"].get<std::string>().find("Quinn"),
            std::string::npos);
}

// A client that gives up on a whole (non-streamed) answer stops its generation too: the server
// sees the closed socket between tokens, logs it long before the answer's end, and answers the
// next client.
TEST(ServeCli, ClientLeavingAWholeAnswerStopsGeneration) {
  ServerProcess server(kModelDir);
  // ignore_eos: the whole answer is kWhole tokens whatever the model says (flash-tiny makes about
  // 800 a second greedily on a 2-core machine: 250 of them when the client leaves at 0.3 s).
  constexpr int kWhole = 2000;
  const json body = chat_body(
      {user("Write a very long story about a dragon.")},
      {{"max_tokens", kWhole}, {"ignore_eos", true}, {"thinking", {{"type", "disabled"}}}});
  const HttpReply gave_up = server.request("/v1/chat/completions", body.dump(), "--max-time 0.3");
  EXPECT_EQ(gave_up.status, 0) << gave_up.body;  // curl gave up: no answer came in 0.3 s
  std::string log;
  for (int i = 0; i < 100 && log.find("client gone") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = server.log();
  }
  EXPECT_NE(log.find("(client gone)"), std::string::npos) << log;
  const size_t generated = log.find(" generated, ");
  ASSERT_NE(generated, std::string::npos) << log;
  const int tokens = std::atoi(log.c_str() + log.rfind(", ", generated) + 2);
  EXPECT_LT(tokens, kWhole) << log;
  std::printf("a whole answer of %d tokens, its client gone after 0.3 s: %d generated\n", kWhole,
              tokens);
  const json a = ask(
      server, chat_body({user("Hi! My name is Quinn.")}, {{"thinking", {{"type", "disabled"}}}}));
  EXPECT_NE(a["choices"][0]["message"]["content"].get<std::string>().find("Quinn"),
            std::string::npos);
}

// Eight clients, twenty requests each (streamed and not, short answers) at once: every one is
// answered in full, and each says what the same question answers alone (greedy decoding).
TEST(ServeCli, EightClientsAtOnceAreAllAnswered) {
  ServerProcess server(kModelDir);
  constexpr int kClients = 8, kRequests = 20;
  const auto question = [](int client) {
    return "What is " + std::to_string(100 + client) + " + " + std::to_string(7 * client) + "?";
  };
  const auto body = [&](int client, bool stream) {
    return chat_body(
        {user(question(client))},
        {{"max_tokens", 12}, {"stream", stream}, {"thinking", {{"type", "disabled"}}}});
  };
  std::map<int, std::string> expected;
  for (int c = 0; c < kClients; ++c)
    expected[c] = ask(server, body(c, false))["choices"][0]["message"]["content"];

  std::atomic<int> complete{0};
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> clients;
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&, c] {
      for (int i = 0; i < kRequests; ++i) {
        const bool stream = i % 2 == 1;
        const HttpReply r = server.request("/v1/chat/completions", body(c, stream).dump());
        std::string content, finish;
        if (r.status == 200 && stream) {
          const StreamedAnswer s = read_stream(r.body);
          if (s.done) content = s.content, finish = s.finish;
        } else if (r.status == 200) {
          const json j = json::parse(r.body, nullptr, false);
          if (!j.is_discarded()) {
            content = j["choices"][0]["message"]["content"];
            finish = j["choices"][0]["finish_reason"];
          }
        }
        if (content == expected[c] && (finish == "stop" || finish == "length"))
          ++complete;
        else
          failures[c] += "request " + std::to_string(i) + ": " + std::to_string(r.status) + " " +
                         r.body.substr(0, 300) + "\n";
      }
    });
  for (std::thread& t : clients) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(complete.load(), kClients * kRequests);
  for (const std::string& f : failures) EXPECT_TRUE(f.empty()) << f;
  std::printf("%d requests from %d clients answered in %.1f s\n", kClients * kRequests, kClients,
              seconds);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace flashdesk::testing
#endif  // FD_HAVE_SERVER
