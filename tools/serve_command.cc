// `dpkit serve`: serves the browser calculator (web/) on http://127.0.0.1:PORT/.
//
// A deliberately small static-file HTTP/1.1 server over POSIX sockets: loopback only,
// GET and HEAD only, one thread per connection, every response closes its connection.
// It exists so that a user can open the calculator without installing a web server; the
// page itself also works from file://.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/command.h"

ABSL_FLAG(int64_t, port, 8000,
          "TCP port on 127.0.0.1 (0 picks a free port and prints it)");
ABSL_FLAG(std::string, dir, "",
          "directory to serve (default: the bundle built by "
          "`bazel build --config=wasm //web:calculator`)");

namespace dpkit::tools {
namespace {

// Where `bazel build --config=wasm //web:calculator` puts the page, relative to the
// workspace root (see web/README.md); the first that holds an index.html is served.
const char* const kBundleCandidates[] = {
    "bazel-out/wasm-fastbuild/bin/web/calculator",
    "bazel-out/wasm-opt/bin/web/calculator",
    "bazel-out/wasm-dbg/bin/web/calculator",
};

// Requests larger than this (headers) are refused; the page only sends short GETs.
constexpr size_t kMaxRequestBytes = 16 * 1024;

bool IsFile(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

bool IsDirectory(const std::string& path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::string ContentType(const std::string& path) {
  const struct {
    const char* extension;
    const char* type;
  } kTypes[] = {
      {".html", "text/html; charset=utf-8"},  {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},    {".wasm", "application/wasm"},
      {".json", "application/json"},          {".svg", "image/svg+xml"},
      {".png", "image/png"},                  {".txt", "text/plain; charset=utf-8"},
  };
  for (const auto& entry : kTypes) {
    const size_t n = std::strlen(entry.extension);
    if (path.size() >= n && path.compare(path.size() - n, n, entry.extension) == 0) {
      return entry.type;
    }
  }
  return "application/octet-stream";
}

// Decodes %XX escapes of a URL path; false on a malformed escape or a NUL byte.
bool DecodePath(const std::string& raw, std::string* decoded) {
  decoded->clear();
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '%') {
      decoded->push_back(raw[i]);
      continue;
    }
    if (i + 2 >= raw.size() || !std::isxdigit(static_cast<unsigned char>(raw[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
      return false;
    }
    const char c = static_cast<char>(std::stoi(raw.substr(i + 1, 2), nullptr, 16));
    if (c == '\0') return false;
    decoded->push_back(c);
    i += 2;
  }
  return true;
}

// Maps a request target ("/index.html?x#y") to a file under `root`; empty if the path is
// malformed or tries to leave the root ("..").
std::string ResolvePath(const std::string& root, const std::string& target) {
  std::string path = target.substr(0, target.find_first_of("?#"));
  std::string decoded;
  if (path.empty() || path[0] != '/' || !DecodePath(path, &decoded)) return "";
  std::stringstream parts(decoded);
  std::string part, relative;
  while (std::getline(parts, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == ".." || part.find('\\') != std::string::npos) return "";
    relative += "/" + part;
  }
  if (relative.empty()) relative = "/index.html";
  std::string full = root + relative;
  if (IsDirectory(full)) full += "/index.html";
  return full;
}

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t sent = send(fd, data, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

void SendResponse(int fd, int status, const std::string& reason, const std::string& type,
                  const std::string& body, bool head_only) {
  const std::string header = absl::StrCat(
      "HTTP/1.1 ", status, " ", reason, "\r\nContent-Type: ", type,
      "\r\nContent-Length: ", body.size(),
      "\r\nCache-Control: no-cache\r\nX-Content-Type-Options: nosniff\r\n"
      "Connection: close\r\n\r\n");
  if (SendAll(fd, header.data(), header.size()) && !head_only) {
    SendAll(fd, body.data(), body.size());
  }
}

void SendError(int fd, int status, const std::string& reason) {
  SendResponse(fd, status, reason, "text/plain; charset=utf-8", reason + "\n", false);
}

// Reads one request, answers it, closes the connection.
void HandleConnection(int fd, std::string root) {
  // A client that connects and sends nothing (browsers pre-connect) must not hold a thread.
  struct timeval timeout = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string request;
  char buffer[4096];
  while (request.find("\r\n\r\n") == std::string::npos) {
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      close(fd);
      return;
    }
    request.append(buffer, static_cast<size_t>(got));
    if (request.size() > kMaxRequestBytes) {
      SendError(fd, 431, "Request Header Fields Too Large");
      close(fd);
      return;
    }
  }
  std::istringstream line(request.substr(0, request.find("\r\n")));
  std::string method, target, version;
  line >> method >> target >> version;
  if (version.rfind("HTTP/1.", 0) != 0 || target.empty()) {
    SendError(fd, 400, "Bad Request");
  } else if (method != "GET" && method != "HEAD") {
    SendError(fd, 405, "Method Not Allowed");
  } else {
    const std::string path = ResolvePath(root, target);
    std::ifstream file(path, std::ios::binary);
    if (path.empty() || !IsFile(path) || !file) {
      SendError(fd, 404, "Not Found");
    } else {
      std::ostringstream body;
      body << file.rdbuf();
      SendResponse(fd, 200, "OK", ContentType(path), body.str(), method == "HEAD");
    }
  }
  close(fd);
}

absl::Status RunServe(const CommandContext& context) {
  if (!context.args.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("serve takes no positional arguments, got '", Abbreviate(context.args[0]), "'"));
  }
  const int64_t port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port must be an integer in [0, 65535], got ", port));
  }
  std::string root = absl::GetFlag(FLAGS_dir);
  if (FlagGiven("dir")) {
    if (!IsFile(root + "/index.html")) {
      return absl::NotFoundError(
          absl::StrCat("--dir must be a directory holding index.html, got '", root, "'"));
    }
  } else {
    // Under `bazel run`, relative paths are taken from the workspace, not the runfiles.
    const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
    const std::string base = workspace != nullptr ? std::string(workspace) + "/" : "";
    root.clear();
    for (const char* candidate : kBundleCandidates) {
      if (IsFile(base + candidate + "/index.html")) {
        root = base + candidate;
        break;
      }
    }
    if (root.empty()) {
      return absl::NotFoundError(
          "no built calculator found under bazel-out/wasm-*/bin/web/calculator; run "
          "`bazel build --config=wasm //web:calculator` in the workspace root, or pass --dir");
    }
  }

  const int server = socket(AF_INET, SOCK_STREAM, 0);
  if (server < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  const int yes = 1;
  setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // Loopback only, never the network.
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(server, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(server, 64) != 0) {
    const std::string error = std::strerror(errno);
    close(server);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on 127.0.0.1:", port, ": ", error));
  }
  socklen_t length = sizeof(address);
  getsockname(server, reinterpret_cast<sockaddr*>(&address), &length);
  std::cout << "Serving " << root << " at http://127.0.0.1:" << ntohs(address.sin_port)
            << "/ (Ctrl-C stops)" << std::endl;

  while (true) {
    const int client = accept(server, nullptr, nullptr);
    if (client < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) {
        if (errno == EMFILE || errno == ENFILE) usleep(100000);
        continue;
      }
      const std::string error = std::strerror(errno);
      close(server);
      return absl::InternalError(absl::StrCat("accept: ", error));
    }
    std::thread(HandleConnection, client, root).detach();
  }
}

DPKIT_REGISTER_COMMAND((Command{
    "serve", "serve the browser privacy calculator on http://127.0.0.1:PORT/",
    "Serves the calculator page built by `bazel build --config=wasm //web:calculator`\n"
    "on the loopback interface only. Run it from the workspace root (or with `bazel run`),\n"
    "or point --dir at a copy of the bundle. Example: dpkit serve --port=8000",
    {"port", "dir"}, &RunServe}));

}  // namespace
}  // namespace dpkit::tools
