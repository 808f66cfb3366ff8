// `--remote URL` for `generate` and `chat`: the options that point a command at a model served
// elsewhere over the OpenAI-compatible API (app/remote/), declared once.
#pragma once

#include <cxxopts.hpp>

#ifdef FLASHDESK_HAVE_REMOTE
#include "app/remote/remote_chat.h"
#endif

namespace flashdesk::cli {

// Adds --remote, --api-key and --remote-model (nothing when built without cpp-httplib).
void add_remote_options(cxxopts::Options& options);
// Whether --remote was given (always false without cpp-httplib).
bool wants_remote(const cxxopts::ParseResult& args);

#ifdef FLASHDESK_HAVE_REMOTE
// The --remote options; InvalidRequest for options that only a local model has (--backend,
// --threads, --max-context, --prefill, --chunk are refused rather than ignored).
remote::RemoteOptions remote_options(const cxxopts::ParseResult& args);
#endif

}  // namespace flashdesk::cli
