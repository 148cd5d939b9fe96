// A cpp-httplib server whose worker threads never wait for a slow client's request.
//
// cpp-httplib gives each accepted connection a worker thread, which then reads the
// request with a per-read timeout: a client that sends one byte every second never trips
// it and holds the worker for as long as it likes (slow loris). Here an accepted
// connection first waits in a gate — one epoll thread that holds only its file
// descriptor and the bytes received so far — until its request head (request line and
// headers, ended by an empty line) is complete; only then does a worker serve it, from
// those bytes, and that worker's time is bounded too:
//   - a request head must be complete within `header_deadline` of the connection's
//     accept (408 and close otherwise), however the bytes trickle in, and at most
//     `max_head_bytes` long (431 and close otherwise);
//   - a request is answered within `response_deadline` of its head, however slowly the
//     client reads (every read and write waits at most the read or write timeout, and
//     none past that deadline);
//   - one client (one peer address) has at most `max_waiting_per_client` connections
//     waiting in the gate: above it, its oldest waiting connection is closed (503), so a
//     fast request of the same client, complete at once, still gets through; the gate
//     holds at most `max_waiting` connections in all (the oldest is closed first);
//   - one client has at most `max_connections_per_client` connections in all, waiting,
//     queued for a worker or served: a new one above it is refused (503).
// A request head that is too long is answered 414 or 431; the gate then reads and drops
// what the client still sends until it closes or its header deadline passes, so that the
// answer is not lost to a reset.
// Each connection carries one request (the response says `Connection: close`), so every
// request passes the gate.
#ifndef DPKIT_TOOLS_SERVE_GATE_H_
#define DPKIT_TOOLS_SERVE_GATE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "httplib.h"

namespace dpkit::tools {

struct GateLimits {
  std::chrono::milliseconds header_deadline{5000};
  std::chrono::milliseconds response_deadline{30000};
  size_t max_waiting_per_client = 64;
  size_t max_connections_per_client = 256;
  size_t max_waiting = 512;
  size_t max_head_bytes = 16 * 1024;
  size_t workers = 32;
  // Longest wait for one read or one write of a served request.
  std::chrono::milliseconds read_timeout{3000};
  std::chrono::milliseconds write_timeout{3000};
};

class GatedServer : public httplib::Server {
 public:
  explicit GatedServer(const GateLimits& limits);
  ~GatedServer() override;
  GatedServer(const GatedServer&) = delete;
  GatedServer& operator=(const GatedServer&) = delete;

  // After bind_to_port: lets the kernel queue `backlog` connections not yet accepted (the
  // library listens with a backlog of 5; a burst of clients then waits for SYN retries,
  // a second each, while the accept thread is not scheduled on a loaded machine).
  void WidenBacklog(int backlog);

 private:
  using Clock = std::chrono::steady_clock;
  struct Waiting {
    std::string client;
    Clock::time_point accepted;
    std::string head;
    bool draining = false;  // answered (too long); reading until the client closes
  };

  // Called by the library on its accept thread's queue: admits `sock` into the gate.
  bool process_and_close_socket(socket_t sock) override;
  void GateLoop();
  // With mu_ held: reads what `fd` has; hands it to a worker once its head is complete.
  void ReadWaiting(int fd);
  // With mu_ held: closes a waiting connection, after a best-effort one-line `reply`.
  void Drop(int fd, const char* reply);
  void CloseOldestWaiting(const std::string* client);
  size_t WaitingOf(const std::string& client) const;
  void Serve(int fd, const std::string& client, std::string head);

  const GateLimits limits_;
  const int epoll_fd_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::map<int, Waiting> waiting_;             // guarded by mu_
  std::map<std::string, size_t> per_client_;   // waiting + served, guarded by mu_
  std::unique_ptr<httplib::ThreadPool> workers_;
  std::thread gate_;
};

}  // namespace dpkit::tools

#endif  // DPKIT_TOOLS_SERVE_GATE_H_
