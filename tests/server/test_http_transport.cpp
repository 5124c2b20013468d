// HttpTransport in front of a real httplib::Server, over loopback sockets: keep-alive and
// pipelining, the control worker that answers /health while every other worker is busy, the
// head deadline, the per-client cap, port reuse refused, and stop() with a client still trickling.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/http_transport.h"

namespace deskside::server {
namespace {

using namespace std::chrono_literals;

class Library : public httplib::Server {
   public:
    using httplib::Server::process_request;
};

// A transport on a free port serving /hello, /health and /block (which waits for release()).
struct Fixture {
    Library lib;
    std::unique_ptr<HttpTransport> transport;
    std::thread thread;
    int port = 0;
    std::mutex mutex;
    std::condition_variable cv;
    bool released = false;
    int blocked = 0;
    std::vector<int> refused;

    explicit Fixture(TransportOptions o = {}) {
        o.host = "127.0.0.1";
        o.port = 0;
        lib.Get("/hello",
                [](const httplib::Request&, httplib::Response& res) { res.set_content("hi", "text/plain"); });
        lib.Get("/health",
                [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
        lib.Post("/echo",
                 [](const httplib::Request& req, httplib::Response& res) { res.set_content(req.body, "text/plain"); });
        lib.Get("/block", [this](const httplib::Request&, httplib::Response& res) {
            std::unique_lock lock(mutex);
            ++blocked;
            cv.notify_all();
            cv.wait(lock, [&] { return released; });
            res.set_content("done", "text/plain");
        });
        transport = std::make_unique<HttpTransport>(
            o,
            [this](httplib::Stream& s, bool close, bool& closed) {
                return lib.process_request(s, close, closed, nullptr);
            },
            [this](const RefusedRequest& r) {
                std::lock_guard lock(mutex);
                refused.push_back(r.status);
            });
        port = transport->bind();
        thread = std::thread([this] { transport->run(); });
    }
    ~Fixture() {
        release();
        transport->stop();
        thread.join();
    }
    void release() {
        std::lock_guard lock(mutex);
        released = true;
        cv.notify_all();
    }
    bool wait_blocked(int n) {
        std::unique_lock lock(mutex);
        return cv.wait_for(lock, 5s, [&] { return blocked >= n; });
    }
};

int connect_to(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    return fd;
}

void send_all(int fd, const std::string& s) {
    REQUIRE(send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()));
}

// Reads until `until` appears, the peer closes, or the timeout passes.
std::string read_until(int fd, const std::string& until, std::chrono::milliseconds timeout = 5000ms) {
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (got.find(until) == std::string::npos) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
        char buf[4096];
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
    }
    return got;
}

struct Socket {
    int fd;
    explicit Socket(int port) : fd(connect_to(port)) {}
    ~Socket() { close(fd); }
};

}  // namespace

TEST_CASE("transport: keep-alive, pipelining and a chunked body", "[server]") {
    Fixture f;
    Socket s(f.port);
    send_all(s.fd, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string got = read_until(s.fd, "\r\n\r\nok");
    CHECK(got.find("HTTP/1.1 200 OK") == 0);
    CHECK(got.find("\r\n\r\nhiHTTP/1.1 200 OK") != std::string::npos);
    send_all(s.fd,
             "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
    CHECK(read_until(s.fd, "abcde").find("Content-Length: 5") != std::string::npos);
}

TEST_CASE("transport: /health answers while every worker is busy", "[server]") {
    TransportOptions o;
    o.workers = 2;
    Fixture f(o);
    Socket a(f.port), b(f.port), c(f.port), h(f.port);
    for (const Socket* s : {&a, &b, &c}) send_all(s->fd, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n");
    REQUIRE(f.wait_blocked(2));
    send_all(h.fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(read_until(h.fd, "ok", 2000ms).find("200 OK") != std::string::npos);
    f.release();
    CHECK(read_until(c.fd, "done").find("200 OK") != std::string::npos);  // it waited its turn
}

TEST_CASE("transport: a head that does not arrive in time gets 408, others are served", "[server]") {
    TransportOptions o;
    o.header_timeout_s = 0.3;
    Fixture f(o);
    Socket slow(f.port);
    send_all(slow.fd, "GET /hello HTTP/1.1\r\nHo");
    Socket fast(f.port);
    send_all(fast.fd, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(read_until(fast.fd, "hi").find("200 OK") != std::string::npos);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string got = read_until(slow.fd, "}", 3000ms);
    CHECK(got.find("HTTP/1.1 408") == 0);
    CHECK(got.find("\"request_timeout\"") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < 1500ms);
}

TEST_CASE("transport: connections per client address are capped", "[server]") {
    TransportOptions o;
    o.max_client_connections = 3;
    Fixture f(o);
    std::vector<std::unique_ptr<Socket>> open;
    for (int i = 0; i < 3; ++i) open.push_back(std::make_unique<Socket>(f.port));
    Socket extra(f.port);
    CHECK(read_until(extra.fd, "}").find("HTTP/1.1 429") == 0);
    open.pop_back();  // one closes: another may come
    std::this_thread::sleep_for(100ms);
    Socket next(f.port);
    send_all(next.fd, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(read_until(next.fd, "hi").find("200 OK") != std::string::npos);
}

TEST_CASE("transport: a body over the limit is refused while it is still being sent", "[server]") {
    TransportOptions o;
    o.limits.max_body = 1000;
    Fixture f(o);
    Socket s(f.port);
    send_all(s.fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; ++i) send_all(s.fd, "190\r\n" + std::string(400, 'a') + "\r\n");
    CHECK(read_until(s.fd, "}").find("HTTP/1.1 413") == 0);
}

TEST_CASE("transport: a second server on the port fails with 'address already in use'", "[server]") {
    Fixture f;
    TransportOptions o;
    o.port = f.port;
    HttpTransport second(
        o, [](httplib::Stream&, bool, bool&) { return false; }, nullptr);
    CHECK_THROWS_WITH(second.bind(), Catch::Contains("address already in use"));
}

TEST_CASE("transport: stop() closes a client that is still trickling its head", "[server]") {
    auto f = std::make_unique<Fixture>();
    Socket s(f->port);
    send_all(s.fd, "GET /hello HTTP/1.1\r\n");
    std::this_thread::sleep_for(50ms);
    const auto t0 = std::chrono::steady_clock::now();
    f.reset();  // stop() and join
    CHECK(std::chrono::steady_clock::now() - t0 < 500ms);
    char c;
    CHECK(recv(s.fd, &c, 1, 0) <= 0);
}

}  // namespace deskside::server
