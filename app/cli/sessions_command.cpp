// `flashdesk-cli sessions list|show|rename|delete|export|import`: the chat sessions stored under
// the data folder (default: the XDG data and cache folders; --data-dir puts everything in one).
#ifdef FLASHDESK_HAVE_STORAGE

// GCC 12 with sanitizers reports a false "maybe uninitialized" inside std::regex, which cxxopts
// uses; the warning is not about our code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstdio>
#include <cxxopts.hpp>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/sessions_print.h"
#include "engine/util/error.h"
#include "storage/file_util.h"
#include "storage/session_json.h"
#include "storage/session_store.h"

namespace flashdesk::cli {

namespace {

using storage::SessionStore;

constexpr const char* kUsage =
    "sessions list [--search TEXT] [--json]\n"
    "  sessions show ID [--json]\n"
    "  sessions rename ID TITLE\n"
    "  sessions delete ID\n"
    "  sessions export ID [--output FILE]\n"
    "  sessions import FILE";

// Opens the store; repairs (crashed answers, orphan files) only when no other FlashDesk process
// owns the data folder.
struct OpenStore {
  std::optional<storage::InstanceLock> lock;
  std::optional<SessionStore> store;
};

void open_store(OpenStore& out, const std::string& data_dir) {
  const storage::StorageLayout layout = data_dir.empty()
                                            ? storage::StorageLayout::from_environment()
                                            : storage::StorageLayout::in(data_dir);
  layout.create_directories();
  out.lock = storage::InstanceLock::try_acquire(layout.lock_file());
  out.store.emplace(layout, storage::SessionStoreOptions{.repair = out.lock.has_value()});
}

int64_t parse_id(const std::vector<std::string>& args, size_t i) {
  if (i >= args.size()) throw InvalidRequest("missing session ID");
  try {
    size_t used = 0;
    const int64_t id = std::stoll(args[i], &used);
    if (used == args[i].size() && id > 0) return id;
  } catch (const std::exception&) {
  }
  throw InvalidRequest("'" + args[i] + "' is not a session ID (a positive number)");
}

const std::string& arg(const std::vector<std::string>& args, size_t i, const char* what) {
  if (i >= args.size()) throw InvalidRequest(std::string("missing ") + what);
  return args[i];
}

void write_export(const std::string& json, const std::string& output) {
  if (output.empty() || output == "-") {
    std::fwrite(json.data(), 1, json.size(), stdout);
    return;
  }
  const std::span<const uint8_t> parts[] = {storage::as_bytes(json)};
  storage::write_file_atomic(output, parts);
}

int run_action(SessionStore& store, const std::string& action, const std::vector<std::string>& args,
               const cxxopts::ParseResult& opts) {
  const bool json = opts["json"].as<bool>();
  if (action == "list") {
    const std::string search = opts["search"].as<std::string>();
    print_session_list(search.empty() ? store.list_sessions() : store.search(search), json);
  } else if (action == "show") {
    const int64_t id = parse_id(args, 0);
    print_session(store.session(id), store.messages(id), json);
  } else if (action == "rename") {
    const int64_t id = parse_id(args, 0);
    store.rename_session(id, arg(args, 1, "new title"));
  } else if (action == "delete") {
    const storage::EraseReport r = store.delete_session(parse_id(args, 0));
    std::printf("deleted: %lld messages, %lld image files, %lld KV blocks%s\n",
                static_cast<long long>(r.messages), static_cast<long long>(r.attachments_removed),
                static_cast<long long>(r.blocks_removed), r.vacuumed ? "; database compacted" : "");
  } else if (action == "export") {
    write_export(storage::session_to_json(store.export_session(parse_id(args, 0))),
                 opts["output"].as<std::string>());
  } else if (action == "import") {
    const std::string& file = arg(args, 0, "FILE to import");
    const int64_t id =
        store.import_session(storage::session_from_json(storage::read_session_file(file), file));
    std::printf("%lld\n", static_cast<long long>(id));
  } else {
    throw InvalidRequest("unknown action '" + action + "'; usage:\n  " + kUsage);
  }
  return 0;
}

}  // namespace

int run_sessions(int argc, char** argv) {
  cxxopts::Options options("flashdesk-cli sessions", "Chat sessions stored by FlashDesk.");
  options.positional_help(std::string("ACTION [ARGS]\n  ") + kUsage);
  options.add_options()("data-dir",
                        "folder for the database, images and KV blocks (default: "
                        "$XDG_DATA_HOME/flashdesk and $XDG_CACHE_HOME/flashdesk)",
                        cxxopts::value<std::string>()->default_value(""))(
      "json", "machine-readable output (list, show)")(
      "search", "list: only sessions whose title or messages contain TEXT",
      cxxopts::value<std::string>()->default_value(""))(
      "o,output", "export: write to FILE instead of standard output",
      cxxopts::value<std::string>()->default_value(""))("h,help", "show this help")(
      "action", "", cxxopts::value<std::string>()->default_value(""))(
      "args", "", cxxopts::value<std::vector<std::string>>()->default_value(""));
  options.parse_positional({"action", "args"});
  cxxopts::ParseResult opts;
  try {
    opts = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::exception& e) {
    throw InvalidRequest(e.what());
  }
  const std::string action = opts["action"].as<std::string>();
  if (opts.count("help") || action.empty()) {
    std::printf("%s\n", options.help({""}).c_str());
    return action.empty() && !opts.count("help") ? 2 : 0;
  }
  std::vector<std::string> args = opts["args"].as<std::vector<std::string>>();
  std::erase(args, std::string());
  OpenStore open;
  open_store(open, opts["data-dir"].as<std::string>());
  return run_action(*open.store, action, args, opts);
}

}  // namespace flashdesk::cli

#endif  // FLASHDESK_HAVE_STORAGE
