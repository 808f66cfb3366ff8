// Text and JSON output of `flashdesk-cli sessions list|show`.
#ifdef FLASHDESK_HAVE_STORAGE

#include "app/cli/sessions_print.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

namespace flashdesk::cli {

using nlohmann::json;

namespace {

std::string local_time(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

json session_json(const storage::SessionInfo& s) {
  const storage::SessionSettings& st = s.settings;
  return {{"id", s.id},
          {"title", s.title},
          {"created_ms", s.created_ms},
          {"updated_ms", s.updated_ms},
          {"message_count", s.message_count},
          {"model_fingerprint", st.model_fingerprint},
          {"effort", st.effort},
          {"thinking", st.thinking},
          {"system_prompt", st.system_prompt},
          {"temperature", st.sampling.temperature},
          {"top_p", st.sampling.top_p},
          {"seed", st.sampling.seed},
          {"max_new_tokens", st.max_new_tokens}};
}

json message_json(const storage::Message& m) {
  json attachments = json::array();
  for (const storage::Attachment& a : m.attachments)
    attachments.push_back({{"digest", a.digest.hex()},
                           {"mime_type", a.mime_type},
                           {"byte_size", a.byte_size},
                           {"path", a.path.string()}});
  return {{"id", m.id},
          {"ordinal", m.ordinal},
          {"role", storage::to_string(m.role)},
          {"status", storage::to_string(m.status)},
          {"text", m.text},
          {"thinking", m.thinking},
          {"token_count", m.token_ids.size()},
          {"created_ms", m.created_ms},
          {"updated_ms", m.updated_ms},
          {"attachments", std::move(attachments)}};
}

void print_json(const json& j) {
  std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
}

}  // namespace

void print_session_list(const std::vector<storage::SessionInfo>& sessions, bool as_json) {
  if (as_json) {
    json list = json::array();
    for (const auto& s : sessions) list.push_back(session_json(s));
    print_json(list);
    return;
  }
  if (sessions.empty()) {
    std::printf("no sessions\n");
    return;
  }
  std::printf("%6s  %-16s  %8s  %s\n", "id", "updated", "messages", "title");
  for (const auto& s : sessions)
    std::printf("%6lld  %-16s  %8lld  %s\n", static_cast<long long>(s.id),
                local_time(s.updated_ms).c_str(), static_cast<long long>(s.message_count),
                s.title.c_str());
}

void print_session(const storage::SessionInfo& s, const std::vector<storage::Message>& messages,
                   bool as_json) {
  if (as_json) {
    json j = session_json(s);
    j["messages"] = json::array();
    for (const auto& m : messages) j["messages"].push_back(message_json(m));
    print_json(j);
    return;
  }
  std::printf("session %lld: %s\n", static_cast<long long>(s.id), s.title.c_str());
  std::printf("created %s, updated %s, effort %d, thinking %s, model %s\n",
              local_time(s.created_ms).c_str(), local_time(s.updated_ms).c_str(), s.settings.effort,
              s.settings.thinking ? "on" : "off", s.settings.model_fingerprint.c_str());
  if (!s.settings.system_prompt.empty())
    std::printf("system: %s\n", s.settings.system_prompt.c_str());
  for (const auto& m : messages) {
    std::printf("\n[%lld] %s%s (%zu tokens)\n", static_cast<long long>(m.ordinal),
                std::string(storage::to_string(m.role)).c_str(),
                m.status == storage::MessageStatus::interrupted ? ", interrupted" : "",
                m.token_ids.size());
    for (const auto& a : m.attachments)
      std::printf("  image %s (%s, %lld bytes)\n", a.digest.hex().c_str(), a.mime_type.c_str(),
                  static_cast<long long>(a.byte_size));
    if (!m.thinking.empty()) std::printf("  <thinking> %s\n", m.thinking.c_str());
    std::printf("%s\n", m.text.c_str());
  }
}

}  // namespace flashdesk::cli

#endif  // FLASHDESK_HAVE_STORAGE
