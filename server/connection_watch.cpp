#include "server/connection_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <netinet/in.h>
#include <set>

namespace deskside::server {
namespace {

// The numeric host and the port of a socket address, written as httplib writes remote_addr
// (getnameinfo with NI_NUMERICHOST), so that the strings compare equal.
bool numeric_address(const sockaddr_storage& a, socklen_t len, std::string& host, int& port) {
    char buf[NI_MAXHOST];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0) return false;
    host = buf;
    if (a.ss_family == AF_INET)
        port = ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
    else if (a.ss_family == AF_INET6)
        port = ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
    else
        return false;
    return true;
}

bool matches(int fd, int local_port, const std::string& remote_addr, int remote_port) {
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;  // not a socket
    if (local.ss_family != AF_INET && local.ss_family != AF_INET6) return false;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return false;  // a listener
    std::string host;
    int port = 0;
    if (!numeric_address(local, local_len, host, port) || port != local_port) return false;
    return numeric_address(peer, peer_len, host, port) && port == remote_port && host == remote_addr;
}

std::mutex http10_mutex;
std::set<int> http10_fds;

bool is_http10(int fd) {
    std::lock_guard lock(http10_mutex);
    return http10_fds.count(fd) != 0;
}

}  // namespace

void ConnectionWatch::set_http10(int fd, bool http10) {
    std::lock_guard lock(http10_mutex);
    if (http10)
        http10_fds.insert(fd);
    else
        http10_fds.erase(fd);
}

std::optional<ConnectionWatch> ConnectionWatch::find(int local_port, const std::string& remote_addr, int remote_port) {
    if (local_port <= 0 || remote_port <= 0) return std::nullopt;
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return std::nullopt;
    std::optional<ConnectionWatch> found;
    while (const dirent* e = readdir(dir)) {
        char* end = nullptr;
        const long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0') continue;  // "." and ".."
        if (matches(static_cast<int>(fd), local_port, remote_addr, remote_port)) {
            found = ConnectionWatch(static_cast<int>(fd));
            break;
        }
    }
    closedir(dir);
    return found;
}

bool ConnectionWatch::peer_closed() const {
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;  // reset, or shut down both ways
    bool fin = p.revents & POLLRDHUP;
    if (!fin && (p.revents & POLLIN)) {
        // Readable: either unread data (not a close) or end of stream (recv gives 0).
        char c;
        const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
        fin = n == 0;
    }
    if (!fin) return false;
    if (is_http10(fd_)) return true;
    if (!probed_) {
        probed_ = true;
        static const char kProbe[] = "HTTP/1.1 100 Continue\r\n\r\n";
        const ssize_t n = send(fd_, kProbe, sizeof kProbe - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK;
    }
    return false;  // half-closed: the probe was taken
}

}  // namespace deskside::server
