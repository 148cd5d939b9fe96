// `dpkit serve`: serves the browser calculator (web/) on http://127.0.0.1:PORT/.
//
// Built on cpp-httplib (Debian's libcpp-httplib-dev): a fixed pool of worker threads and
// the library's HTTP/1.1 parsing, behind a gate (serve_gate.h) where a connection waits,
// without a worker, until its request head is complete: a head must arrive within 5 s
// however slowly its bytes trickle, an answer is sent within 30 s however slowly the
// client reads, and one client address has at most 64 connections waiting for their
// heads and 256 in all. On top of it
// this file decides what may be served: GET and HEAD only, a Host header naming the
// loopback address (a page on another origin cannot reach the server through DNS
// rebinding), and only regular files that lie under the served folder once every
// symbolic link is resolved. Files are streamed in 64 KiB pieces, so a connection holds
// at most one piece in memory whatever the file's size. It listens on 127.0.0.1 only.
// It exists so that a user can open the calculator without installing a web server; the
// page itself also works from file://.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "dpkit/tools/cli.h"
#include "dpkit/tools/command.h"
#include "dpkit/tools/serve_gate.h"

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

// The only address served on: the loopback interface.
constexpr char kLoopbackHost[] = "127.0.0.1";
// Worker threads (a fixed pool, created once at start, never one per connection),
// deadlines and per-client limits: serve_gate.h's defaults. A client that stops reading
// is dropped after 3 s without progress (the clients are on this machine: the server
// listens on the loopback interface only), one that reads slowly after 30 s.
const GateLimits kLimits;
// Connections the kernel queues before accept: above the gate's own limit.
constexpr int kListenBacklog = 1024;
// The page only sends bodiless GETs; any request body above this is refused.
constexpr size_t kMaxBodyBytes = 16 * 1024;
// Files are streamed in pieces of this size.
constexpr size_t kPieceBytes = 64 * 1024;

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
    if (absl::EndsWith(path, entry.extension)) return entry.type;
  }
  return "application/octet-stream";
}

// The canonical absolute path of `path` (every symbolic link resolved), or "" if it
// does not exist.
std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return "";
  return resolved;
}

// Maps a decoded request path ("/index.html") to the canonical path of a file under
// `root` (itself canonical); "" if the path is malformed, names "..", or resolves (through
// symbolic links) to anything outside `root`.
std::string ResolvePath(const std::string& root, const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find('\0') != std::string::npos) return "";
  std::stringstream parts(path);
  std::string part, relative;
  while (std::getline(parts, part, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == ".." || part.find('\\') != std::string::npos) return "";
    relative += "/" + part;
  }
  std::string full = root + relative;
  if (IsDirectory(full)) full += "/index.html";
  const std::string real = RealPath(full);
  if (real.size() <= root.size() + 1 || real.compare(0, root.size(), root) != 0 ||
      real[root.size()] != '/') {
    return "";
  }
  return real;
}

// True if the request's Host names this server's loopback address (127.0.0.1 or
// localhost, with the listening port or none). HTTP/1.0 requests may omit Host.
bool HostIsLoopback(const httplib::Request& request, int port) {
  if (!request.has_header("Host")) return request.version == "HTTP/1.0";
  const std::string host = request.get_header_value("Host");
  const size_t colon = host.rfind(':');
  const std::string name = colon == std::string::npos ? host : host.substr(0, colon);
  if (name != "127.0.0.1" && name != "localhost") return false;
  if (colon == std::string::npos) return true;
  int given = 0;
  return absl::SimpleAtoi(host.substr(colon + 1), &given) && given == port;
}

void SetText(httplib::Response& response, int status, const std::string& text) {
  response.status = status;
  response.set_content(text + "\n", "text/plain; charset=utf-8");
}

// Answers GET or HEAD for one file under `root`, streaming it piece by piece.
void ServeFile(const std::string& root, const httplib::Request& request,
               httplib::Response& response) {
  const std::string path = ResolvePath(root, request.path);
  // O_NONBLOCK: opening a FIFO placed in the folder must not block a worker.
  const int fd = path.empty() ? -1 : open(path.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK);
  struct stat info;
  if (fd < 0 || fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    if (fd >= 0) close(fd);
    SetText(response, 404, "Not Found");
    return;
  }
  auto file = std::shared_ptr<int>(new int(fd), [](int* f) {
    close(*f);
    delete f;
  });
  response.status = 200;
  response.set_content_provider(
      static_cast<size_t>(info.st_size), ContentType(path),
      [file](size_t offset, size_t length, httplib::DataSink& sink) {
        char piece[kPieceBytes];
        const ssize_t got = pread(*file, piece, std::min(length, kPieceBytes),
                                  static_cast<off_t>(offset));
        // A file that shrank while being sent ends the connection (false).
        return got > 0 && sink.write(piece, static_cast<size_t>(got));
      });
}

// Every request passes here before the library's own routing; all are handled here.
httplib::Server::HandlerResponse Route(const std::string& root, int port,
                                       const httplib::Request& request,
                                       httplib::Response& response) {
  if (!HostIsLoopback(request, port)) {
    SetText(response, request.has_header("Host") ? 421 : 400,
            request.has_header("Host") ? "Misdirected Request" : "Bad Request");
  } else if (request.method != "GET" && request.method != "HEAD") {
    response.set_header("Allow", "GET, HEAD");
    SetText(response, 405, "Method Not Allowed");
  } else {
    ServeFile(root, request, response);
  }
  return httplib::Server::HandlerResponse::Handled;
}

absl::StatusOr<std::string> FindRoot() {
  std::string root = absl::GetFlag(FLAGS_dir);
  if (FlagGiven("dir")) {
    if (!IsFile(root + "/index.html")) {
      return absl::NotFoundError(absl::StrCat(
          "--dir must be a directory holding index.html, got '", Abbreviate(root), "'"));
    }
    return RealPath(root);
  }
  // Under `bazel run`, relative paths are taken from the workspace, not the runfiles.
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  const std::string base = workspace != nullptr ? std::string(workspace) + "/" : "";
  for (const char* candidate : kBundleCandidates) {
    if (IsFile(base + candidate + "/index.html")) return RealPath(base + candidate);
  }
  return absl::NotFoundError(
      "no built calculator found under bazel-out/wasm-*/bin/web/calculator; run "
      "`bazel build --config=wasm //web:calculator` in the workspace root, or pass --dir");
}

void Configure(httplib::Server& server, const std::string& root, const int* port) {
  server.set_payload_max_length(kMaxBodyBytes);
  server.set_default_headers({{"Cache-Control", "no-cache"},
                              {"X-Content-Type-Options", "nosniff"}});
  server.set_pre_routing_handler(
      [root, port](const httplib::Request& request, httplib::Response& response) {
        return Route(root, *port, request, response);
      });
  // The library's own error pages (400 for a malformed request, 414, 413): plain text.
  server.set_error_handler([](const httplib::Request&, httplib::Response& response) {
    if (response.body.empty()) SetText(response, response.status, "Error");
  });
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
        SetText(response, 500, "Internal Server Error");
      });
}

absl::Status RunServe(const CommandContext& context) {
  if (!context.args.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("serve takes no positional arguments, got '", Abbreviate(context.args[0]), "'"));
  }
  const int64_t requested = absl::GetFlag(FLAGS_port);
  if (requested < 0 || requested > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port must be an integer in [0, 65535], got ", requested));
  }
  const absl::StatusOr<std::string> root = FindRoot();
  if (!root.ok()) return root.status();

  int port = 0;  // Read by the request handlers once bound; outlives `server`.
  std::unique_ptr<GatedServer> gated;
  try {
    gated = std::make_unique<GatedServer>(kLimits);
  } catch (const std::system_error& error) {  // The workers could not be created.
    return absl::ResourceExhaustedError(absl::StrCat("serve: ", error.what()));
  }
  GatedServer& server = *gated;
  Configure(server, *root, &port);
  // Loopback only, never the network.
  port = requested == 0 ? server.bind_to_any_port(kLoopbackHost)
                        : (server.bind_to_port(kLoopbackHost, static_cast<int>(requested))
                               ? static_cast<int>(requested)
                               : -1);
  if (port <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", kLoopbackHost, ":",
                                               requested, ": ", std::strerror(errno)));
  }
  server.WidenBacklog(kListenBacklog);
  std::cout << "Serving " << *root << " at http://" << kLoopbackHost << ":" << port
            << "/ (Ctrl-C stops)" << std::endl;
  try {
    if (!server.listen_after_bind()) {
      return absl::InternalError(absl::StrCat("accept failed: ", std::strerror(errno)));
    }
  } catch (const std::system_error& error) {  // The pool's threads could not be created.
    return absl::ResourceExhaustedError(absl::StrCat("serve: ", error.what()));
  }
  return absl::OkStatus();
}

DPKIT_REGISTER_COMMAND((Command{
    "serve", "serve the browser privacy calculator on http://127.0.0.1:PORT/",
    "Serves the calculator page built by `bazel build --config=wasm //web:calculator`\n"
    "on the loopback interface only. Run it from the workspace root (or with `bazel run`),\n"
    "or point --dir at a copy of the bundle. Example: dpkit serve --port=8000",
    {"port", "dir"}, &RunServe}));

}  // namespace
}  // namespace dpkit::tools
