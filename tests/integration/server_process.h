// Runs `flashdesk-cli serve` as a child process for the server tests: starts it on a free port
// (--port 0, read back from its first line), keeps its log in a file, and talks to it with curl.
// Unless the test names a --data-dir (or turns --kv-store off), the server's KV blocks go to a
// folder of its own, removed afterwards: tests never share cached KV, nor touch the home folder.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace flashdesk::testing {

// Output of a shell command (stdout only).
inline std::string shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  ::pclose(pipe);
  return out;
}

// A shell word: the text in single quotes.
inline std::string quoted(const std::string& text) {
  std::string q = "'";
  for (char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct HttpReply {
  int status = 0;
  std::string body;
};

class ServerProcess {
 public:
  // `args`: serve's options after --model (e.g. "--api-key k").
  explicit ServerProcess(const std::string& model_dir, std::vector<std::string> args = {}) {
    const std::string name =
        "flashdesk-serve-" + std::to_string(::getpid()) + "-" + std::to_string(count_++);
    log_ = std::filesystem::temp_directory_path() / (name + ".log");
    if (!names_option(args, "--data-dir") && !names_option(args, "--kv-store")) {
      data_dir_ = std::filesystem::temp_directory_path() / (name + "-data");
      args.insert(args.end(), {"--data-dir", data_dir_.string()});
    }
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      const std::string log = log_.string();
      std::FILE* err = std::fopen(log.c_str(), "w");
      if (err != nullptr) ::dup2(::fileno(err), STDERR_FILENO);
      ::close(out[0]);
      std::vector<std::string> argv = {FD_CLI_PATH, "serve", "--model", model_dir, "--port", "0"};
      argv.insert(argv.end(), args.begin(), args.end());
      std::vector<char*> c;
      for (std::string& a : argv) c.push_back(a.data());
      c.push_back(nullptr);
      ::execv(c[0], c.data());
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    char ch;
    while (::read(out[0], &ch, 1) == 1 && ch != '\n') line += ch;
    ::close(out[0]);
    const size_t colon = line.rfind(':');
    if (colon == std::string::npos || line.find("/v1") == std::string::npos)
      throw std::runtime_error("serve did not start: '" + line + "'\n" + log());
    port_ = std::stoi(line.substr(colon + 1));
  }
  ~ServerProcess() {
    if (pid_ > 0) stop();
    std::error_code ec;
    std::filesystem::remove(log_, ec);
    if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_, ec);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  // Everything the server wrote to stderr so far.
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Exit status after SIGTERM (-1: not a clean exit; -2: still running after 30 s, killed).
  int stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 3000 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      return -2;
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // A request with curl: `body` empty is a GET; `extra` adds curl options.
  HttpReply request(const std::string& path, const std::string& body = {},
                    const std::string& extra = {}) const {
    std::string cmd = "curl -sS -N --max-time 120 -w '\\n%{http_code}' " + extra + " ";
    std::filesystem::path file;
    if (!body.empty()) {
      file = log_.string() + ".body-" +
             std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
      std::ofstream(file, std::ios::binary) << body;
      if (extra.find("Content-Type") == std::string::npos)
        cmd += "-H 'Content-Type: application/json' ";
      cmd += "--data-binary @" + quoted(file.string()) + " ";
    }
    const std::string out = shell(cmd + quoted(url(path)) + " 2>&1");
    if (!file.empty()) std::filesystem::remove(file);
    HttpReply r;
    const size_t nl = out.rfind('\n');
    if (nl == std::string::npos) return r;
    r.status = std::atoi(out.c_str() + nl + 1);
    r.body = out.substr(0, nl);
    return r;
  }

 private:
  static bool names_option(const std::vector<std::string>& args, const std::string& option) {
    for (const std::string& a : args)
      if (a == option || a.rfind(option + "=", 0) == 0) return true;
    return false;
  }

  static inline int count_ = 0;
  pid_t pid_ = -1;
  int port_ = 0;
  std::filesystem::path log_;
  std::filesystem::path data_dir_;  // the server's own, when the test named none
};

}  // namespace flashdesk::testing
