"""End-to-end tests of `dpkit serve` (issue 21): what it serves, and how it holds under load.

Usage: serve_test.py PATH_TO_DPKIT [--only=files|load]

Runs the server on 127.0.0.1 only (port 0: a free port) over a temporary folder and talks
to it with raw sockets, so that malformed requests reach it unchanged.
  files: regular files under the folder are served, streamed byte for byte; traversal
         (17 spellings), symbolic links out of the folder, FIFOs, other methods and
         foreign Host headers are refused; a bare-LF request is answered at once.
  load:  500 requests at 20 in parallel while 200 slow clients (100 that send half a
         request and stall, 100 that ask for an 8 MB file and never read) hold
         connections; every request is answered, the whole run takes under 40 s, the
         server's memory stays under 128 MB (it streams files), the stalled clients are
         dropped, and it still serves afterwards.
  slow:  190 slow-loris clients that trickle their request head a byte every 0.3 s (40
         from 127.0.0.1, the normal requests' address, and 150 from 127.0.0.2) while 300
         requests at 20 in parallel are each answered within 2 s; the server closes the
         127.0.0.2 clients above its per-client cap at once and every trickling client
         within its header deadline (5 s) although it keeps sending; it still serves
         afterwards.
Prints 'N passed, N failed' and exits non-zero on any failure.
"""

import concurrent.futures
import hashlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIG_BYTES = 8 * 1024 * 1024
MAX_RSS_KB = 128 * 1024
LOAD_SECONDS_LIMIT = 40.0

RESULTS = {"passed": 0, "failed": 0}


def check(condition, what):
    if condition:
        RESULTS["passed"] += 1
    else:
        RESULTS["failed"] += 1
        print("FAIL: " + what, flush=True)


def make_folder(base):
    www = os.path.join(base, "www")
    os.makedirs(os.path.join(www, "sub"))
    os.makedirs(os.path.join(base, "outside"))
    with open(os.path.join(www, "index.html"), "w") as f:
        f.write("<p>calculator</p>\n")
    with open(os.path.join(www, "sub", "index.html"), "w") as f:
        f.write("sub\n")
    with open(os.path.join(base, "outside", "secret.txt"), "w") as f:
        f.write("secret\n")
    with open(os.path.join(base, "www-secret.txt"), "w") as f:
        f.write("secret\n")
    with open(os.path.join(www, "big.bin"), "wb") as f:
        f.write(os.urandom(BIG_BYTES))
    os.symlink(os.path.join(base, "outside", "secret.txt"), os.path.join(www, "out.txt"))
    os.symlink(os.path.join(base, "outside"), os.path.join(www, "outdir"))
    os.symlink("/etc", os.path.join(www, "etc"))
    os.symlink("index.html", os.path.join(www, "inside.html"))
    os.mkfifo(os.path.join(www, "fifo"))
    return www


class Server:
    def __init__(self, dpkit, folder):
        self.process = subprocess.Popen(
            [dpkit, "serve", "--port=0", "--dir=" + folder],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not match:
            self.process.kill()
            raise RuntimeError("serve printed no address: %r" % line)
        self.port = int(match.group(1))

    def status_field(self, name):
        with open("/proc/%d/status" % self.process.pid) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1])
        return -1

    def open_fds(self):
        return len(os.listdir("/proc/%d/fd" % self.process.pid))

    def stop(self):
        self.process.kill()
        self.process.wait()


def exchange(port, request, timeout=10.0):
    """Sends raw bytes, reads until the server closes; returns (status, body, headers)."""
    data = b""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(request)
            while True:
                piece = s.recv(1 << 16)
                if not piece:
                    break
                data += piece
    except OSError as error:  # A timeout or a reset: no answer (status -1).
        print("no answer to %r: %s" % (request[:60], error), flush=True)
        return -1, b"", ""
    head, _, body = data.partition(b"\r\n\r\n")
    match = re.match(rb"HTTP/1\.[01] (\d{3})", head)
    return (int(match.group(1)) if match else -1), body, head.decode("latin-1")


def get(port, path, host=None, method="GET"):
    host = host if host is not None else "127.0.0.1:%d" % port
    request = "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (method, path, host)
    return exchange(port, request.encode("latin-1"))


TRAVERSALS = [
    "/../www-secret.txt", "/..%2fwww-secret.txt", "/%2e%2e/www-secret.txt",
    "/%2E%2E%2Fwww-secret.txt", "/sub/../../www-secret.txt", "/sub/%2e%2e/%2e%2e/www-secret.txt",
    "/./../www-secret.txt", "/..\\www-secret.txt", "/%5c..%5cwww-secret.txt",
    "//../www-secret.txt", "/../outside/secret.txt", "/%2e%2e%2foutside%2fsecret.txt",
    "/..;/www-secret.txt", "/index.html%00../../www-secret.txt", "/%00",
    "/....//www-secret.txt", "/%252e%252e/www-secret.txt",
]


def test_files(dpkit, base):
    folder = make_folder(base)
    server = Server(dpkit, folder)
    try:
        port = server.port
        status, body, _ = get(port, "/")
        check(status == 200 and body == b"<p>calculator</p>\n", "GET / serves index.html")
        status, body, _ = get(port, "/sub/")
        check(status == 200 and body == b"sub\n", "a folder serves its index.html")
        status, body, _ = get(port, "/inside.html")
        check(status == 200 and body == b"<p>calculator</p>\n", "a link inside the folder is served")
        status, body, head = get(port, "/index.html", method="HEAD")
        check(status == 200 and body == b"" and "Content-Length: 18" in head, "HEAD: headers only")
        status, body, _ = get(port, "/big.bin")
        with open(os.path.join(folder, "big.bin"), "rb") as f:
            expected = hashlib.sha256(f.read()).hexdigest()
        check(status == 200 and hashlib.sha256(body).hexdigest() == expected,
              "an 8 MB file is streamed byte for byte (got %d bytes)" % len(body))
        for path in TRAVERSALS:
            status, body, _ = get(port, path)
            check(status in (400, 404) and b"secret" not in body,
                  "traversal %s refused (status %d)" % (path, status))
        for path in ["/out.txt", "/outdir/secret.txt", "/etc/passwd", "/etc/hostname"]:
            status, body, _ = get(port, path)
            check(status == 404 and b"secret" not in body and b"root:" not in body,
                  "symbolic link out of the folder %s refused (status %d)" % (path, status))
        started = time.monotonic()
        status, _, _ = get(port, "/fifo")
        check(status == 404 and time.monotonic() - started < 2, "a FIFO is refused at once")
        for host in ["evil.example", "evil.example:%d" % port, "127.0.0.1:1", "127.0.0.1.evil.example"]:
            status, body, _ = get(port, "/", host=host)
            check(status == 421 and b"calculator" not in body, "Host %s refused (%d)" % (host, status))
        status, _, _ = get(port, "/", host="localhost:%d" % port)
        check(status == 200, "Host localhost:PORT served")
        status, _, head = get(port, "/", method="POST")
        check(status == 405 and "Allow: GET, HEAD" in head, "POST refused with 405")
        status, _, _ = exchange(port, b"GET / HTTP/1.0\r\n\r\n")
        check(status == 200, "HTTP/1.0 without Host served")
        status, _, _ = exchange(port, b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        check(status == 400, "HTTP/1.1 without Host refused with 400")
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(("GET / HTTP/1.1\nHost: 127.0.0.1:%d\n\n" % port).encode())
            try:
                first = s.recv(64)
            except OSError:
                first = b""
        check(re.match(rb"HTTP/1\.1 (200|400) ", first) is not None and
              time.monotonic() - started < 1, "a bare-LF request is answered at once (%r)" % first)
        status, _, _ = exchange(port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n")
        check(status in (400, 414), "an over-long request line is refused (%d)" % status)
        status, _, _ = get(port, "/")
        check(status == 200, "still serves after the malformed requests")
    finally:
        server.stop()


def slowloris(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    return s


def slow_reader(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(("GET /big.bin HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port).encode())
    return s


def test_load(dpkit, base):
    folder = make_folder(base)
    server = Server(dpkit, folder)
    try:
        port = server.port
        fds_before = server.open_fds()
        started = time.monotonic()
        slow = []
        for i in range(100):
            slow.append(slowloris(port))
            slow.append(slow_reader(port))
        peak_rss = [server.status_field("VmRSS")]

        def one(i):
            status, body, _ = exchange(
                port, ("GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close"
                       "\r\n\r\n" % port).encode(), timeout=40)
            if i % 25 == 0:
                peak_rss[0] = max(peak_rss[0], server.status_field("VmRSS"))
            return status == 200 and body == b"<p>calculator</p>\n"

        with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
            answered = list(pool.map(one, range(500)))
        elapsed = time.monotonic() - started
        peak_rss[0] = max(peak_rss[0], server.status_field("VmRSS"))
        print("load: %d/500 answered in %.1f s beside 200 slow clients; peak RSS %d kB; "
              "threads %d" % (sum(answered), elapsed, peak_rss[0], server.status_field("Threads")),
              flush=True)
        check(all(answered), "all 500 requests answered (%d)" % sum(answered))
        check(elapsed < LOAD_SECONDS_LIMIT, "load run took %.1f s" % elapsed)
        check(peak_rss[0] < MAX_RSS_KB, "peak RSS %d kB under %d kB" % (peak_rss[0], MAX_RSS_KB))
        check(server.status_field("Threads") <= 40, "a fixed pool of threads")
        # The stalled clients are dropped by the server's timeouts, not by closing them here.
        deadline = time.monotonic() + 30
        while server.open_fds() > fds_before + 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        check(server.open_fds() <= fds_before + 2,
              "stalled connections dropped (%d fds open, %d before)" % (server.open_fds(), fds_before))
        for s in slow:
            s.close()
        started = time.monotonic()
        status, _, _ = get(port, "/")
        check(status == 200 and time.monotonic() - started < 1, "still serves after the load")
        check(server.process.poll() is None, "the server is still running")
    finally:
        server.stop()


# serve_gate.h's limits: a request head within 5 s; at most 64 connections per address.
HEADER_DEADLINE_SECONDS = 5.0
MAX_PER_CLIENT = 64


class Trickler:
    """Slow-loris clients: each sends half a request head, then one byte every 0.3 s
    until the server closes it; records when the server closed each one (seconds after
    its connection was made)."""

    def __init__(self, port, sources):
        self.sockets = []
        self.connected = []  # when each connection was made (monotonic seconds)
        for source in sources:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((source, 0))
            s.connect(("127.0.0.1", port))
            self.connected.append(time.monotonic())
            s.sendall(b"GET /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            self.sockets.append(s)
        self.started = time.monotonic()
        self.closed_at = [None] * len(self.sockets)
        self.stopping = False
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stopping and None in self.closed_at:
            for i, s in enumerate(self.sockets):
                if self.closed_at[i] is not None:
                    continue
                try:
                    # Data (a 408 or 503) or end of file: the server has closed it.
                    if s.recv(4096, socket.MSG_DONTWAIT | socket.MSG_PEEK) is not None:
                        self.closed_at[i] = time.monotonic() - self.connected[i]
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    self.closed_at[i] = time.monotonic() - self.connected[i]
                    continue
                try:
                    s.send(b"x")
                except OSError:
                    self.closed_at[i] = time.monotonic() - self.connected[i]
            time.sleep(0.3)

    def closed(self, first=0, last=None):
        return sum(1 for t in self.closed_at[first:last] if t is not None)

    def stop(self):
        self.stopping = True
        self.thread.join()
        for s in self.sockets:
            s.close()


def test_slow_clients(dpkit, base):
    folder = make_folder(base)
    server = Server(dpkit, folder)
    trickler = None
    try:
        port = server.port
        fds_before = server.open_fds()
        # 40 clients on the normal requests' address (more than the 32 workers, fewer than
        # the per-client cap with 20 requests in flight) and 150 on another (above the cap).
        trickler = Trickler(port, ["127.0.0.1"] * 40 + ["127.0.0.2"] * 150)
        print("slow clients: 190 connected in %.1f s" %
              (trickler.started - trickler.connected[0]), flush=True)
        time.sleep(1.0)  # Every trickling client has sent a few more bytes.
        early = [t for t in trickler.closed_at[40:] if t is not None and t < 1.0]
        check(len(early) >= 150 - MAX_PER_CLIENT,
              "the server closed %d of the 150 clients of 127.0.0.2 within 1 s (cap %d)" %
              (len(early), MAX_PER_CLIENT))
        check(trickler.closed(0, 40) == 0 or
              min(t for t in trickler.closed_at[:40] if t is not None) >= HEADER_DEADLINE_SECONDS,
              "no client of 127.0.0.1 closed before its header deadline: %r" %
              trickler.closed_at[:40])

        def one(_):
            started = time.monotonic()
            status, body, _ = exchange(
                port, ("GET /index.html HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close"
                       "\r\n\r\n" % port).encode(), timeout=10)
            return status == 200 and body == b"<p>calculator</p>\n", time.monotonic() - started

        with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
            answers = list(pool.map(one, range(300)))
        slowest = max(seconds for _, seconds in answers)
        print("slow clients: %d/300 answered beside 190 trickling clients, slowest %.2f s; "
              "threads %d" % (sum(ok for ok, _ in answers), slowest,
                              server.status_field("Threads")), flush=True)
        check(all(ok for ok, _ in answers), "all 300 requests answered beside slow clients")
        check(slowest < 2.0, "slowest request beside slow clients took %.2f s" % slowest)
        # The trickling clients keep sending; the header deadline closes them all.
        deadline = trickler.started + HEADER_DEADLINE_SECONDS + 3
        while trickler.closed() < 190 and time.monotonic() < deadline:
            time.sleep(0.2)
        late = [t for t in trickler.closed_at if t is None or t > HEADER_DEADLINE_SECONDS + 2]
        check(not late, "every trickling client closed within %.0f s of its start (%d not)" %
              (HEADER_DEADLINE_SECONDS + 2, len(late)))
        trickler.stop()
        trickler = None
        deadline = time.monotonic() + 10
        while server.open_fds() > fds_before + 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        check(server.open_fds() <= fds_before + 2,
              "slow connections released (%d fds open, %d before)" %
              (server.open_fds(), fds_before))
        started = time.monotonic()
        status, _, _ = get(port, "/")
        check(status == 200 and time.monotonic() - started < 1, "still serves after slow clients")
        check(server.process.poll() is None, "the server is still running")
    finally:
        if trickler is not None:
            trickler.stop()
        server.stop()


def main():
    dpkit = sys.argv[1]
    only = next((a.split("=", 1)[1] for a in sys.argv[2:] if a.startswith("--only=")), "")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as base:
        if only in ("", "files"):
            test_files(dpkit, os.path.join(base, "files"))
        if only in ("", "load"):
            test_load(dpkit, os.path.join(base, "load"))
        if only in ("", "slow"):
            test_slow_clients(dpkit, os.path.join(base, "slow"))
    print("%d passed, %d failed" % (RESULTS["passed"], RESULTS["failed"]))
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
