#include "server/http_transport.h"

#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "server/api_error.h"
#include "server/connection_watch.h"

namespace deskside::server {

using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kLinger = std::chrono::seconds(2);  // reading and dropping what a refused client still sends
constexpr auto kSweepInterval = std::chrono::milliseconds(100);
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after running out of descriptors
constexpr auto kStopWait = std::chrono::seconds(1);            // for responses being written when stop() comes
constexpr uint64_t kListenerTag = 0, kWakeTag = 1;

Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// The numeric host of a socket address, as getnameinfo writes it (ConnectionWatch and
// httplib compare these strings), and its port.
bool numeric_address(const sockaddr_storage& a, socklen_t len, std::string& host, int& port) {
    char buf[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, buf, sizeof buf, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return false;
    host = buf;
    port = std::atoi(serv);
    return true;
}

const char* reason_phrase(int status) {
    switch (status) {
        case 400: return "Bad Request";
        case 408: return "Request Timeout";
        case 413: return "Payload Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 417: return "Expectation Failed";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 501: return "Not Implemented";
        case 505: return "HTTP Version Not Supported";
        default: return "Error";
    }
}

// A complete response in OpenAI's error shape that closes the connection.
std::string error_response(int status, const std::string& message) {
    const char* code = status == 429 ? "too_many_connections" : status == 408 ? "request_timeout" : "invalid_request";
    const std::string body =
        ApiError(status, message, "", code, status == 429 ? "overloaded_error" : "invalid_request_error")
            .body()
            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\nConnection: close\r\n\r\n" + body;
}

bool wait_writable(int fd, double timeout_s) {
    pollfd p{fd, POLLOUT, 0};
    int n;
    do n = poll(&p, 1, static_cast<int>(timeout_s * 1000));
    while (n < 0 && errno == EINTR);
    return n == 1 && (p.revents & POLLOUT) && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

}  // namespace

struct HttpTransport::Connection {
    enum class Phase { kReading, kDispatched, kLingering };
    uint64_t id = 0;
    int fd = -1;
    std::string client, local;  // numeric addresses
    int client_port = 0, local_port = 0;
    bool counted = false;  // in per_client_
    bool in_epoll = false;
    Phase phase = Phase::kReading;
    RequestReader reader;
    RequestReader::State last_state = RequestReader::State::kHead;
    bool continue_sent = false;
    int served = 0;
    std::string pending;  // bytes after the request being served: the next, pipelined request
    Clock::time_point deadline;

    explicit Connection(HttpLimits limits) : reader(limits) {}
};

namespace {

// The request as httplib reads it, the response written to the socket. A peer that only shut
// down its sending side (it waits for the response) is still writable.
class ConnectionStream final : public httplib::Stream {
   public:
    ConnectionStream(const HttpTransport::Connection& c, std::string request, double write_timeout_s)
        : c_(c), request_(std::move(request)), write_timeout_s_(write_timeout_s) {}

    bool is_readable() const override { return pos_ < request_.size(); }
    bool is_writable() const override { return wait_writable(c_.fd, write_timeout_s_); }
    ssize_t read(char* ptr, size_t size) override {
        size = std::min(size, request_.size() - pos_);
        std::memcpy(ptr, request_.data() + pos_, size);
        pos_ += size;
        return static_cast<ssize_t>(size);
    }
    ssize_t write(const char* ptr, size_t size) override {
        size_t done = 0;
        while (done < size) {
            const ssize_t n = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL);
            if (n > 0) {
                done += static_cast<size_t>(n);
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else if (!(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
                         wait_writable(c_.fd, write_timeout_s_))) {
                return -1;
            }
        }
        return static_cast<ssize_t>(size);
    }
    void get_remote_ip_and_port(std::string& ip, int& port) const override {
        ip = c_.client;
        port = c_.client_port;
    }
    void get_local_ip_and_port(std::string& ip, int& port) const override {
        ip = c_.local;
        port = c_.local_port;
    }
    socket_t socket() const override { return c_.fd; }

   private:
    const HttpTransport::Connection& c_;
    std::string request_;
    size_t pos_ = 0;
    double write_timeout_s_;
};

}  // namespace

HttpTransport::HttpTransport(TransportOptions options, Dispatch dispatch, OnRefused on_refused)
    : options_(std::move(options)), dispatch_(std::move(dispatch)), on_refused_(std::move(on_refused)) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd_ < 0 || wake_fd_ < 0)
        throw std::runtime_error(std::string("cannot set up the server: ") + std::strerror(errno));
}

HttpTransport::~HttpTransport() {
    for (const int fd : {listen_fd_, epoll_fd_, wake_fd_})
        if (fd >= 0) ::close(fd);
}

int HttpTransport::bind() {
    const std::string where = options_.host + ":" + std::to_string(options_.port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(options_.port);
    if (const int rc =
            getaddrinfo(options_.host.empty() ? nullptr : options_.host.c_str(), port.c_str(), &hints, &found))
        throw std::runtime_error("cannot listen on " + where + ": " + gai_strerror(rc));
    int error = 0;
    for (const addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            error = errno;
            continue;
        }
        // SO_REUSEADDR lets a restarted server bind while old connections sit in TIME_WAIT; on
        // Linux it never lets two sockets listen on one port (SO_REUSEPORT would, so it stays off).
        const int yes = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, std::max(SOMAXCONN, 1024)) == 0) {
            listen_fd_ = fd;
        } else {
            error = errno;
            ::close(fd);
        }
    }
    freeaddrinfo(found);
    if (listen_fd_ < 0) {
        std::string why = std::strerror(error);
        if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
        throw std::runtime_error("cannot listen on " + where + ": " + why);
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    std::string host;
    int bound = options_.port;
    if (getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&local), &len) == 0)
        numeric_address(local, len, host, bound);
    return bound;
}

void HttpTransport::run() {
    for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { worker(false); });
    workers_.emplace_back([this] { worker(true); });
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerTag;
    if (listen_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
    ev.data.u64 = kWakeTag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    auto last_sweep = Clock::now();
    epoll_event events[64];
    while (!stopping_) {
        const int n = epoll_wait(epoll_fd_, events, 64, static_cast<int>(kSweepInterval.count()));
        for (int i = 0; i < n; ++i) {
            const uint64_t tag = events[i].data.u64;
            if (tag == kListenerTag) {
                accept_all();
            } else if (tag == kWakeTag) {
                uint64_t count;
                while (::read(wake_fd_, &count, sizeof count) > 0) {
                }
            } else if (const auto it = connections_.find(tag); it != connections_.end()) {
                on_readable(*it->second);  // events of a connection closed earlier in this batch find nothing
            }
        }
        take_back_finished();
        if (Clock::now() - last_sweep >= kSweepInterval) {
            sweep_deadlines();
            last_sweep = Clock::now();
        }
    }
    shut_down_connections();
}

void HttpTransport::stop() {
    stopping_ = true;
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
}

void HttpTransport::accept_all() {
    while (true) {
        sockaddr_storage peer{}, local{};
        socklen_t peer_len = sizeof peer, local_len = sizeof local;
        const int fd =
            accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                // Out of descriptors: the listener would report readable forever; wait for one to close.
                epoll_event ev{};
                ev.data.u64 = kListenerTag;
                epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
                accept_paused_ = true;
                accept_paused_at_ = Clock::now();
            }
            return;
        }
        auto c = std::make_unique<Connection>(options_.limits);
        c->id = next_id_++;
        c->fd = fd;
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len);
        if (!numeric_address(peer, peer_len, c->client, c->client_port) ||
            !numeric_address(local, local_len, c->local, c->local_port)) {
            ::close(fd);
            continue;
        }
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.u64 = c->id;
        epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
        c->in_epoll = true;
        Connection& conn = *c;
        connections_.emplace(c->id, std::move(c));
        int& open = per_client_[conn.client];
        if (open >= options_.max_client_connections) {
            refuse(conn, 429,
                   "too many connections from " + conn.client + " (at most " +
                       std::to_string(options_.max_client_connections) + ")");
            continue;
        }
        ++open;
        conn.counted = true;
        conn.deadline = Clock::now() + seconds(options_.header_timeout_s);
    }
}

void HttpTransport::on_readable(Connection& c) {
    char buf[16384];
    // A bounded number of reads per event, so one fast client cannot starve the others.
    for (int round = 0; round < 16 && c.phase != Connection::Phase::kDispatched; ++round) {
        const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) return close_connection(c.id);  // closed before a complete request, or reset
        if (c.phase == Connection::Phase::kReading) read_request(c, buf, static_cast<size_t>(n));
    }
}

void HttpTransport::read_request(Connection& c, const char* data, size_t n) {
    const bool was_started = c.reader.started();
    const size_t used = c.reader.feed(std::string_view(data, n));
    const auto now = Clock::now();
    // A kept-alive connection was idle until now: the head's deadline starts at its first byte.
    if (!was_started && c.reader.started() && c.served > 0) c.deadline = now + seconds(options_.header_timeout_s);
    const RequestReader::State state = c.reader.state();
    if (state == RequestReader::State::kBody && c.last_state == RequestReader::State::kHead)
        c.deadline = now + seconds(options_.body_timeout_s);
    c.last_state = state;
    if (state == RequestReader::State::kRefused)
        return refuse(c, c.reader.refused_status(), c.reader.refused_reason());
    if (state == RequestReader::State::kComplete) {
        c.pending.append(data + used, n - used);
        return dispatch(c);
    }
    if (c.reader.wants_continue() && !c.continue_sent) {
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        (void)!::send(c.fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        c.continue_sent = true;
    }
}

void HttpTransport::dispatch(Connection& c) {
    c.phase = Connection::Phase::kDispatched;
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    c.in_epoll = false;
    const HttpHead& head = c.reader.head();
    const auto& paths = options_.control_paths;
    const bool control = head.method == "GET" && std::find(paths.begin(), paths.end(), head.path()) != paths.end();
    {
        std::lock_guard lock(mutex_);
        (control ? ready_control_ : ready_).push_back(&c);
    }
    (control ? control_cv_ : ready_cv_).notify_one();
}

void HttpTransport::refuse(Connection& c, int status, const std::string& reason) {
    const std::string response = error_response(status, reason);
    (void)!::send(c.fd, response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    // Closing with unread input would reset the connection, and the client might lose the
    // response; so the connection is half-closed and drained for a moment first.
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Connection::Phase::kLingering;
    c.deadline = Clock::now() + kLinger;
    RefusedRequest r{status, "", "", c.client};
    if (c.reader.state() != RequestReader::State::kHead && !c.reader.head().method.empty()) {
        r.method = c.reader.head().method;
        r.path = c.reader.head().path();
    }
    if (on_refused_) on_refused_(r);
}

void HttpTransport::close_connection(uint64_t id) {
    const auto it = connections_.find(id);
    if (it == connections_.end()) return;
    Connection& c = *it->second;
    if (c.in_epoll) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
    ::close(c.fd);
    if (c.counted && --per_client_[c.client] == 0) per_client_.erase(c.client);
    connections_.erase(it);
    resume_accepting();
}

void HttpTransport::resume_accepting() {
    if (!accept_paused_ || stopping_) return;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenerTag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    accept_paused_ = false;
}

void HttpTransport::sweep_deadlines() {
    const auto now = Clock::now();
    std::vector<uint64_t> expired;
    for (auto& [id, c] : connections_) {
        if (c->phase == Connection::Phase::kDispatched || now < c->deadline) continue;
        if (c->phase == Connection::Phase::kReading && c->reader.started())
            refuse(
                *c, 408,
                c->reader.state() == RequestReader::State::kHead
                    ? "the request headers did not arrive in time (" + std::to_string(options_.header_timeout_s) +
                          " s)"
                    : "the request body did not arrive in time (" + std::to_string(options_.body_timeout_s) + " s)");
        else
            expired.push_back(id);  // idle, or done lingering
    }
    for (const uint64_t id : expired) close_connection(id);
    if (accept_paused_ && now - accept_paused_at_ >= kAcceptPause) resume_accepting();  // descriptors held elsewhere
}

void HttpTransport::take_back_finished() {
    std::vector<std::pair<Connection*, bool>> finished;
    {
        std::lock_guard lock(mutex_);
        finished.swap(finished_);
    }
    for (const auto& [c, keep] : finished) {
        if (!keep || stopping_) {
            close_connection(c->id);
            continue;
        }
        ++c->served;
        c->reader = RequestReader(options_.limits);
        c->last_state = RequestReader::State::kHead;
        c->continue_sent = false;
        c->phase = Connection::Phase::kReading;
        c->deadline = Clock::now() + seconds(options_.keep_alive_timeout_s);
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.u64 = c->id;
        epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev);
        c->in_epoll = true;
        if (!c->pending.empty()) {
            const std::string pipelined = std::move(c->pending);
            c->pending.clear();
            read_request(*c, pipelined.data(), pipelined.size());
        }
    }
}

void HttpTransport::worker(bool control) {
    std::deque<Connection*>& queue = control ? ready_control_ : ready_;
    std::condition_variable& cv = control ? control_cv_ : ready_cv_;
    while (true) {
        Connection* c = nullptr;
        {
            std::unique_lock lock(mutex_);
            cv.wait(lock, [&] { return workers_exit_ || !queue.empty(); });
            if (queue.empty()) return;
            c = queue.front();
            queue.pop_front();
        }
        serve(*c);
    }
}

void HttpTransport::serve(Connection& c) {
    const bool http10 = c.reader.head().minor_version == 0;
    const bool close = draining_ || !c.reader.keep_alive() || c.served + 1 >= options_.max_requests_per_connection;
    bool closed = false, ok = false;
    ConnectionWatch::set_http10(c.fd, http10);
    try {
        ConnectionStream stream(c, c.reader.canonical(), options_.write_timeout_s);
        ok = dispatch_(stream, close, closed);
    } catch (...) {
        ok = false;  // the library reports handler errors itself; this is a transport failure
    }
    ConnectionWatch::set_http10(c.fd, false);
    {
        std::lock_guard lock(mutex_);
        finished_.emplace_back(&c, ok && !closed && !close);
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
}

void HttpTransport::shut_down_connections() {
    if (listen_fd_ >= 0) {
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        ::close(listen_fd_);
        listen_fd_ = -1;
    }
    {
        std::lock_guard lock(mutex_);
        for (Connection* c : ready_) finished_.emplace_back(c, false);
        for (Connection* c : ready_control_) finished_.emplace_back(c, false);
        ready_.clear();
        ready_control_.clear();
        workers_exit_ = true;
    }
    ready_cv_.notify_all();
    control_cv_.notify_all();
    std::vector<uint64_t> idle;
    for (const auto& [id, c] : connections_)
        if (c->phase != Connection::Phase::kDispatched) idle.push_back(id);
    for (const uint64_t id : idle) close_connection(id);
    // Responses being written get a moment to finish, then their sockets are shut down so that
    // their writes fail and the workers return.
    const auto deadline = Clock::now() + kStopWait;
    bool shut = false;
    while (true) {
        take_back_finished();
        if (connections_.empty()) break;
        if (!shut && Clock::now() >= deadline) {
            for (const auto& [id, c] : connections_) ::shutdown(c->fd, SHUT_RDWR);
            shut = true;
        }
        pollfd p{wake_fd_, POLLIN, 0};
        poll(&p, 1, 20);
        uint64_t count;
        while (::read(wake_fd_, &count, sizeof count) > 0) {
        }
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
}

}  // namespace deskside::server
