#include "dpkit/tools/serve_gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace dpkit::tools {
namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// How often the gate looks for connections past their header deadline.
constexpr Millis kSweepInterval{200};
// The answer to a connection whose request head did not arrive in time.
constexpr char kTimeout[] = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n";
// The answer to a connection closed because its client holds too many.
constexpr char kBusy[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n";

// "a.b.c.d" (or the IPv6 text) and port of a socket's peer (`peer`) or own end.
void SocketAddress(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage address;
  socklen_t length = sizeof(address);
  ip.clear();
  port = 0;
  const int got = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length)
                       : getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (got != 0) return;
  char text[INET6_ADDRSTRLEN] = {0};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
    port = ntohs(v4->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    port = ntohs(v6->sin6_port);
  }
  ip = text;
}

// True once `head` holds the empty line that ends a request head (CRLF or bare LF).
bool HeadComplete(const std::string& head) {
  return head.find("\r\n\r\n") != std::string::npos || head.find("\n\n") != std::string::npos;
}

// Waits until `fd` is ready for `events`, at most `timeout` and never past `deadline`.
bool WaitFor(int fd, short events, Millis timeout, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  const Millis wait = std::min(timeout, left);
  if (wait.count() <= 0) return false;
  pollfd entry{fd, events, 0};
  int ready;
  do {
    ready = poll(&entry, 1, static_cast<int>(wait.count()));
  } while (ready < 0 && errno == EINTR);
  return ready > 0;
}

// The library's view of one served connection: the request head the gate has read,
// then the socket, with every wait bounded by its timeout and by the request's deadline.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int fd, std::string head, const GateLimits& limits)
      : fd_(fd),
        head_(std::move(head)),
        limits_(limits),
        deadline_(Clock::now() + limits.response_deadline) {}

  bool is_readable() const override {
    return offset_ < head_.size() ||
           WaitFor(fd_, POLLIN, limits_.read_timeout, deadline_);
  }
  bool is_writable() const override {
    return WaitFor(fd_, POLLOUT, limits_.write_timeout, deadline_);
  }
  ssize_t read(char* ptr, size_t size) override {
    if (offset_ < head_.size()) {
      const size_t n = std::min(size, head_.size() - offset_);
      std::memcpy(ptr, head_.data() + offset_, n);
      offset_ += n;
      return static_cast<ssize_t>(n);
    }
    if (!WaitFor(fd_, POLLIN, limits_.read_timeout, deadline_)) return -1;
    return recv(fd_, ptr, size, 0);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    return send(fd_, ptr, size, MSG_NOSIGNAL);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    SocketAddress(fd_, /*peer=*/true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    SocketAddress(fd_, /*peer=*/false, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  const int fd_;
  const std::string head_;
  size_t offset_ = 0;
  const GateLimits& limits_;
  const Clock::time_point deadline_;
};

}  // namespace

GatedServer::GatedServer(const GateLimits& limits)
    : limits_(limits),
      epoll_fd_(epoll_create1(EPOLL_CLOEXEC)),
      workers_(std::make_unique<httplib::ThreadPool>(limits.workers)) {
  // The library's own queue only admits accepted sockets into the gate: one thread.
  new_task_queue = [] { return new httplib::ThreadPool(1); };
  try {
    gate_ = std::thread([this] { GateLoop(); });
  } catch (...) {
    workers_->shutdown();  // Its threads must be joined before they are destroyed.
    throw;
  }
}

GatedServer::~GatedServer() {
  stopping_ = true;
  gate_.join();
  workers_->shutdown();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& entry : waiting_) close(entry.first);
  waiting_.clear();
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

void GatedServer::WidenBacklog(int backlog) {
  const socket_t sock = svr_sock_;
  if (sock != INVALID_SOCKET) ::listen(sock, backlog);  // Linux: updates the backlog.
}

bool GatedServer::process_and_close_socket(socket_t sock) {
  std::string client;
  int port = 0;
  SocketAddress(sock, /*peer=*/true, client, port);
  fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK);
  std::lock_guard<std::mutex> lock(mu_);
  if (WaitingOf(client) >= limits_.max_waiting_per_client) CloseOldestWaiting(&client);
  if (waiting_.size() >= limits_.max_waiting) CloseOldestWaiting(nullptr);
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.fd = sock;
  if (per_client_[client] >= limits_.max_connections_per_client || epoll_fd_ < 0 ||
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, sock, &event) != 0) {
    // This client has too many connections queued or being served: refuse the new one.
    send(sock, kBusy, std::strlen(kBusy), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(sock);
    return false;
  }
  ++per_client_[client];
  waiting_[sock] = Waiting{client, Clock::now(), ""};
  return true;
}

size_t GatedServer::WaitingOf(const std::string& client) const {
  size_t count = 0;
  for (const auto& entry : waiting_) count += entry.second.client == client ? 1 : 0;
  return count;
}

void GatedServer::CloseOldestWaiting(const std::string* client) {
  auto oldest = waiting_.end();
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (client != nullptr && it->second.client != *client) continue;
    if (oldest == waiting_.end() || it->second.accepted < oldest->second.accepted) oldest = it;
  }
  if (oldest != waiting_.end()) {
    Drop(oldest->first, kBusy);
  }
}

void GatedServer::Drop(int fd, const char* reply) {
  const auto it = waiting_.find(fd);
  if (it == waiting_.end()) return;
  if (reply != nullptr) send(fd, reply, std::strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  if (--per_client_[it->second.client] == 0) per_client_.erase(it->second.client);
  waiting_.erase(it);
}

void GatedServer::ReadWaiting(int fd) {
  const auto it = waiting_.find(fd);
  if (it == waiting_.end()) return;
  Waiting& waiting = it->second;
  char piece[4096];
  while (waiting.draining) {  // Answered already: drop what comes until the client closes.
    const ssize_t got = recv(fd, piece, sizeof(piece), 0);
    if (got > 0) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    Drop(fd, nullptr);
    return;
  }
  while (waiting.head.size() < limits_.max_head_bytes && !HeadComplete(waiting.head)) {
    const size_t want = std::min(sizeof(piece), limits_.max_head_bytes - waiting.head.size());
    const ssize_t got = recv(fd, piece, want, 0);
    if (got > 0) {
      waiting.head.append(piece, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    Drop(fd, nullptr);  // Closed by the client before its head was complete, or an error.
    return;
  }
  if (!HeadComplete(waiting.head)) {
    // Too long: answer, end our side, and keep reading until the client closes (closing
    // with unread bytes would reset the connection and lose the answer).
    const char* reply =
        waiting.head.find('\n') == std::string::npos
            ? "HTTP/1.1 414 URI Too Long\r\nConnection: close\r\n\r\n"
            : "HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n";
    send(fd, reply, std::strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    waiting.draining = true;
    waiting.head.clear();
    ReadWaiting(fd);
    return;
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  std::string client = std::move(waiting.client);
  std::string head = std::move(waiting.head);
  waiting_.erase(it);
  workers_->enqueue([this, fd, client = std::move(client), head = std::move(head)]() mutable {
    Serve(fd, client, std::move(head));
  });
}

void GatedServer::GateLoop() {
  epoll_event events[64];
  while (!stopping_) {
    const int n = epoll_fd_ < 0 ? 0
                                : epoll_wait(epoll_fd_, events, 64,
                                             static_cast<int>(kSweepInterval.count()));
    if (epoll_fd_ < 0) std::this_thread::sleep_for(kSweepInterval);
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n; ++i) ReadWaiting(events[i].data.fd);
    const Clock::time_point now = Clock::now();
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      const int fd = it->first;
      const bool late = now - it->second.accepted >= limits_.header_deadline;
      const bool answered = it->second.draining;
      ++it;  // Drop erases fd's entry.
      if (late) {
        Drop(fd, answered ? nullptr : kTimeout);
      }
    }
  }
}

void GatedServer::Serve(int fd, const std::string& client, std::string head) {
  {
    DeadlineStream stream(fd, std::move(head), limits_);
    bool connection_closed = false;
    process_request(stream, /*close_connection=*/true, connection_closed, nullptr);
  }
  shutdown(fd, SHUT_RDWR);
  close(fd);
  std::lock_guard<std::mutex> lock(mu_);
  if (--per_client_[client] == 0) per_client_.erase(client);
}

}  // namespace dpkit::tools
