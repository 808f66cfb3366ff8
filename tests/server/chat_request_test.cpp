// The request parser of the API server: what it accepts, how options map to a turn, and that
// every refusal is an ApiError naming the field.
#include "app/server/chat_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "app/server/api_error.h"

namespace flashdesk::server {
namespace {

using nlohmann::json;

json body(json extra = json::object()) {
  json b = {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  b.update(extra);
  return b;
}

// The param of the ApiError `text` raises (empty: none).
std::string refused_param(const std::string& text) {
  try {
    parse_chat_request(text);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    const json j = json::parse(e.json());
    return j["error"]["param"].is_null() ? "" : j["error"]["param"].get<std::string>();
  }
  ADD_FAILURE() << "accepted: " << text;
  return "(accepted)";
}

TEST(ChatRequest, ReadsMessagesAndDefaults) {
  const json b = {
      {"model", "m"},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "developer"}, {"content", "Be kind."}},
        {{"role", "user"}, {"content", "Hi"}},
        {{"role", "assistant"}, {"content", "Hello"}, {"reasoning_content", "x"}},
        {{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}};
  const ChatRequest r = parse_chat_request(b.dump());
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.system_prompt, "Be brief.\n\nBe kind.");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].role, Role::kAssistant);
  EXPECT_EQ(r.messages[1].text, "Hello");
  EXPECT_EQ(r.messages[2].text, "a\n\nb");
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.turn.mode, ThinkingMode::kThinking);
  EXPECT_EQ(r.turn.effort.value(), ReasoningEffort::kDefault);
  EXPECT_EQ(r.turn.generation.max_new_tokens, kDefaultMaxTokens);
  EXPECT_EQ(r.turn.generation.sampling.temperature, 0.0f);
}

TEST(ChatRequest, MapsReasoningEffortAndThinking) {
  const auto effort = [](json value) {
    const ChatRequest r = parse_chat_request(body({{"reasoning_effort", value}}).dump());
    return r.turn.mode == ThinkingMode::kChat ? 0 : r.turn.effort.value();
  };
  EXPECT_EQ(effort("low"), 50);
  EXPECT_EQ(effort("medium"), 75);
  EXPECT_EQ(effort("high"), 75);
  EXPECT_EQ(effort("max"), 100);
  EXPECT_EQ(effort(33), 33);
  EXPECT_EQ(effort("none"), 0);
  EXPECT_EQ(parse_chat_request(body({{"thinking", {{"type", "disabled"}}}}).dump()).turn.mode,
            ThinkingMode::kChat);
  EXPECT_EQ(refused_param(body({{"reasoning_effort", 0}}).dump()), "reasoning_effort");
  EXPECT_EQ(refused_param(body({{"reasoning_effort", 101}}).dump()), "reasoning_effort");
  EXPECT_EQ(refused_param(body({{"reasoning_effort", "minimal"}}).dump()), "reasoning_effort");
  EXPECT_EQ(refused_param(body({{"thinking", {{"type", "auto"}}}}).dump()), "thinking");
}

TEST(ChatRequest, ReadsSamplingStopAndStream) {
  const ChatRequest r = parse_chat_request(body({{"max_tokens", 7},
                                                 {"temperature", 0.5},
                                                 {"top_p", 0.9},
                                                 {"seed", 42},
                                                 {"stop", {"x", "yz"}},
                                                 {"stream", true},
                                                 {"stream_options", {{"include_usage", true}}}})
                                               .dump());
  EXPECT_EQ(r.turn.generation.max_new_tokens, 7);
  EXPECT_FLOAT_EQ(r.turn.generation.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.turn.generation.sampling.top_p, 0.9f);
  EXPECT_EQ(r.turn.generation.sampling.seed, 42u);
  EXPECT_FALSE(r.turn.generation.ignore_eos);
  EXPECT_TRUE(parse_chat_request(body({{"ignore_eos", true}}).dump()).turn.generation.ignore_eos);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(parse_chat_request(body({{"stop", "END"}}).dump()).stop,
            std::vector<std::string>{"END"});
  EXPECT_EQ(parse_chat_request(body({{"max_completion_tokens", 9}}).dump())
                .turn.generation.max_new_tokens,
            9);
}

TEST(ChatRequest, DecodesImageDataUrlsAndBareBase64) {
  const auto image = [](const std::string& url) {
    return body({{"messages",
                  {{{"role", "user"},
                    {"content",
                     {{{"type", "image_url"}, {"image_url", {{"url", url}}}},
                      {{"type", "text"}, {"text", "what?"}}}}}}}});
  };
  ChatRequest r = parse_chat_request(image("data:image/png;base64,aGVsbG8=").dump());
  ASSERT_EQ(r.messages[0].images.size(), 1u);
  EXPECT_EQ(std::string(r.messages[0].images[0].bytes.begin(), r.messages[0].images[0].bytes.end()),
            "hello");
  EXPECT_EQ(r.messages[0].images[0].label, "messages[0].content[0]");
  EXPECT_EQ(r.messages[0].text, "what?");
  r = parse_chat_request(image("aGVsbG8=").dump());
  EXPECT_EQ(r.messages[0].images[0].bytes.size(), 5u);
  EXPECT_EQ(refused_param(image("data:image/png;base64,a$b=").dump()),
            "messages[0].content[0].image_url");
  EXPECT_EQ(refused_param(image("data:image/png,raw").dump()), "messages[0].content[0].image_url");
  EXPECT_EQ(refused_param(image("http://example.com/a.png").dump()),
            "messages[0].content[0].image_url");
}

TEST(ChatRequest, RefusesWhatItCannotServeNamingTheField) {
  EXPECT_EQ(refused_param("not json"), "");
  EXPECT_EQ(refused_param("[1,2]"), "");
  EXPECT_EQ(refused_param(body({{"temprature", 1}}).dump()), "temprature");
  EXPECT_EQ(refused_param(json{{"messages", body()["messages"]}}.dump()), "model");
  EXPECT_EQ(refused_param(body({{"messages", json::array()}}).dump()), "messages");
  EXPECT_EQ(refused_param(body({{"messages", {{{"role", "user"}}}}}).dump()),
            "messages[0].content");
  EXPECT_EQ(refused_param(body({{"messages", {{{"role", "tool"}, {"content", "x"}}}}}).dump()),
            "messages[0].role");
  EXPECT_EQ(refused_param(body({{"messages",
                                 {{{"role", "user"}, {"content", "a"}},
                                  {{"role", "system"}, {"content", "late"}},
                                  {{"role", "user"}, {"content", "b"}}}}})
                              .dump()),
            "messages[1].role");
  EXPECT_EQ(refused_param(body({{"messages", {{{"role", "assistant"}, {"content", "x"}}}}}).dump()),
            "messages");
  EXPECT_EQ(refused_param(body({{"messages",
                                 {{{"role", "assistant"},
                                   {"content", {{{"type", "image_url"}, {"image_url", "aGk="}}}}},
                                  {{"role", "user"}, {"content", "b"}}}}})
                              .dump()),
            "messages[0].content[0]");
  EXPECT_EQ(refused_param(body({{"max_tokens", 0}}).dump()), "max_tokens");
  EXPECT_EQ(refused_param(body({{"max_tokens", 1.5}}).dump()), "max_tokens");
  EXPECT_EQ(refused_param(body({{"temperature", -1}}).dump()), "temperature");
  EXPECT_EQ(refused_param(body({{"temperature", "hot"}}).dump()), "temperature");
  EXPECT_EQ(refused_param(body({{"top_p", 0}}).dump()), "top_p");
  EXPECT_EQ(refused_param(body({{"seed", -1}}).dump()), "seed");
  EXPECT_EQ(refused_param(body({{"seed", 18446744073709551615u}}).dump()), "seed");
  EXPECT_EQ(refused_param(body({{"stop", {"a", "b", "c", "d", "e"}}}).dump()), "stop");
  EXPECT_EQ(refused_param(body({{"stop", ""}}).dump()), "stop");
  EXPECT_EQ(refused_param(body({{"stream", "yes"}}).dump()), "stream");
  EXPECT_EQ(refused_param(body({{"ignore_eos", 1}}).dump()), "ignore_eos");
  EXPECT_EQ(refused_param(body({{"stream_options", {{"include_usage", true}}}}).dump()),
            "stream_options");
  EXPECT_EQ(refused_param(body({{"n", 2}}).dump()), "n");
  EXPECT_EQ(refused_param(body({{"presence_penalty", 0.5}}).dump()), "presence_penalty");
  EXPECT_EQ(refused_param(body({{"logprobs", true}}).dump()), "logprobs");
  EXPECT_EQ(refused_param(body({{"tools", json::array()}}).dump()), "tools");
  EXPECT_EQ(refused_param(body({{"response_format", {{"type", "json_object"}}}}).dump()),
            "response_format");
}

TEST(ChatRequest, ErrorObjectHasTheOpenAiShape) {
  const ApiError e = ApiError::invalid("bad", std::string("top_p"));
  const json j = json::parse(e.json());
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "top_p");
  EXPECT_TRUE(j["error"]["code"].is_null());
}

}  // namespace
}  // namespace flashdesk::server
