// ConnectionWatch on real loopback TCP connections: it finds the accepted socket by the
// addresses httplib reports, and tells a closed or reset peer from an idle, talkative or
// half-closed one.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "server/connection_watch.h"

namespace deskside::server {
namespace {

int port_of(int fd, bool peer) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    REQUIRE((peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len)) == 0);
    return ntohs(a.sin_port);
}

// A listener, a client connected to it and the accepted server side.
struct Connection {
    int listener = -1, client = -1, server = -1;
    Connection() {
        listener = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        REQUIRE(listen(listener, 4) == 0);
        socklen_t len = sizeof a;
        REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0);
        client = socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        server = accept(listener, nullptr, nullptr);
        REQUIRE(server >= 0);
    }
    ~Connection() {
        for (int fd : {listener, client, server})
            if (fd >= 0) close(fd);
    }
    std::optional<ConnectionWatch> watch() const { return ConnectionWatch::find(port_of(server, false), "127.0.0.1", port_of(server, true)); }
};

// The kernel delivers a loopback FIN at once, but give it a bounded moment anyway.
bool becomes_closed(const ConnectionWatch& w) {
    for (int i = 0; i < 200; ++i) {
        if (w.peer_closed()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
}

}  // namespace

TEST_CASE("connection watch: finds the accepted socket by its addresses", "[server]") {
    Connection c;
    const auto w = c.watch();
    REQUIRE(w);
    CHECK(w->fd() == c.server);  // not the client end, which has the same port pair reversed
    CHECK_FALSE(ConnectionWatch::find(port_of(c.server, false), "127.0.0.1", port_of(c.server, true) ^ 1));
    CHECK_FALSE(ConnectionWatch::find(port_of(c.server, false), "10.1.2.3", port_of(c.server, true)));
}

TEST_CASE("connection watch: an open peer is not closed, even when it sends more", "[server]") {
    Connection c;
    const auto w = c.watch();
    REQUIRE(w);
    CHECK_FALSE(w->peer_closed());
    REQUIRE(write(c.client, "GET / HTTP/1.1\r\n", 16) == 16);  // a pipelined request, unread
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK_FALSE(w->peer_closed());
    char buf[16];
    CHECK(recv(c.server, buf, sizeof buf, MSG_DONTWAIT) == 16);  // the peek left it there
}

TEST_CASE("connection watch: a peer that closes is seen", "[server]") {
    Connection c;
    const auto w = c.watch();
    REQUIRE(w);
    SECTION("close") {}
    SECTION("close with unread data") { REQUIRE(write(c.client, "x", 1) == 1); }
    close(c.client);
    c.client = -1;
    CHECK(becomes_closed(*w));
}

TEST_CASE("connection watch: a peer that only half-closes is still there, and gets the probe", "[server]") {
    Connection c;
    const auto w = c.watch();
    REQUIRE(w);
    REQUIRE(shutdown(c.client, SHUT_WR) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int i = 0; i < 5; ++i) CHECK_FALSE(w->peer_closed());
    char buf[64] = {};
    CHECK(recv(c.client, buf, sizeof buf - 1, 0) == 25);
    CHECK(std::string(buf) == "HTTP/1.1 100 Continue\r\n\r\n");
}

TEST_CASE("connection watch: for HTTP/1.0 a half-close is a close (no interim responses)", "[server]") {
    Connection c;
    const auto w = c.watch();
    REQUIRE(w);
    ConnectionWatch::set_http10(c.server, true);
    REQUIRE(shutdown(c.client, SHUT_WR) == 0);
    CHECK(becomes_closed(*w));
    ConnectionWatch::set_http10(c.server, false);
}

}  // namespace deskside::server
