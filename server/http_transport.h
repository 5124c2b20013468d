// The server's TCP side: the listening socket, the connections, and reading requests off them,
// in front of cpp-httplib, which then parses, routes and answers the request.
//
// Debian's cpp-httplib (0.11) gives each connection a worker thread from the moment it is
// accepted, reads with a per-byte timeout but no deadline, has no limit on header bytes or on a
// chunked body, listens with a backlog of 5 and turns on SO_REUSEPORT, so that a second server
// can bind the same port. Here one event-loop thread accepts connections and reads requests
// without blocking (RequestReader: limits, framing), with a deadline for the head and one for
// the body and a cap on connections per client address; only a complete request takes a worker,
// which hands it to the library through a Stream (httplib::Server::process_request) and writes
// the response straight to the socket. GET /health and /metrics have a worker of their own, so
// they answer while every other worker is busy.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/http_request_reader.h"

namespace httplib {
class Stream;
}

namespace deskside::server {

struct TransportOptions {
    std::string host = "127.0.0.1";
    int port = 8080;  // 0: any free port
    HttpLimits limits;
    double header_timeout_s =
        10;                      // from accepting a connection, or from the first byte of a request, to its blank line
    double body_timeout_s = 60;  // from the blank line to the last byte of the body
    double keep_alive_timeout_s = 5;   // an idle connection between requests
    double write_timeout_s = 30;       // one write may wait this long for the client to read
    int max_client_connections = 128;  // per client address; more get 429
    int workers = 32;
    int max_requests_per_connection = 100;
    std::vector<std::string> control_paths = {"/health", "/metrics"};  // GET answered by a worker of its own
};

// A request the transport answered itself (it broke a limit or the grammar, or timed out).
struct RefusedRequest {
    int status = 0;
    std::string method, path, client;  // method and path empty when the head was not read
};

class HttpTransport {
   public:
    // Serves one request: read it from `stream`, write the response to it. `close`: answer with
    // "Connection: close". Returns false, or sets `closed`, when the connection must end.
    using Dispatch = std::function<bool(httplib::Stream& stream, bool close, bool& closed)>;
    using OnRefused = std::function<void(const RefusedRequest&)>;

    HttpTransport(TransportOptions options, Dispatch dispatch, OnRefused on_refused);
    ~HttpTransport();

    // Binds and listens; throws std::runtime_error naming the address and the system's reason
    // ("address already in use"). Returns the bound port.
    int bind();
    // Serves until stop(); call from a thread of its own. Returns once every connection is closed.
    void run();
    // From now on every response closes its connection.
    void set_draining() { draining_ = true; }
    // Closes idle and half-read connections at once and, after a second, the sockets of
    // responses still being written; run() then returns.
    void stop();

    struct Connection;

   private:
    void accept_all();
    void on_readable(Connection& c);
    void read_request(Connection& c, const char* data, size_t n);
    void dispatch(Connection& c);
    void refuse(Connection& c, int status, const std::string& reason);
    void close_connection(uint64_t id);
    void resume_accepting();
    void sweep_deadlines();
    void take_back_finished();
    void worker(bool control);
    void serve(Connection& c);
    void shut_down_connections();

    TransportOptions options_;
    Dispatch dispatch_;
    OnRefused on_refused_;
    int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
    std::atomic<bool> draining_{false}, stopping_{false};
    bool accept_paused_ = false;  // out of descriptors: the listener is off for a moment
    std::chrono::steady_clock::time_point accept_paused_at_;
    uint64_t next_id_ = 2;  // 0 and 1 tag the listener and the wake-up descriptor in epoll events
    std::map<uint64_t, std::unique_ptr<Connection>> connections_;  // the loop thread's alone
    std::map<std::string, int> per_client_;                        // open connections by client address

    // Complete requests waiting for a worker, and connections whose response is written.
    std::mutex mutex_;
    std::condition_variable ready_cv_, control_cv_;
    std::deque<Connection*> ready_, ready_control_;
    std::vector<std::pair<Connection*, bool>> finished_;  // bool: keep the connection open
    bool workers_exit_ = false;
    std::vector<std::thread> workers_;
};

}  // namespace deskside::server
