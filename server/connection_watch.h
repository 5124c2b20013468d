// Noticing that an HTTP client went away while its non-streamed request is still generating.
//
// A streamed response notices a disconnect when a write fails, but a non-streamed one writes
// nothing until the end. Debian's cpp-httplib (0.11) hands a handler neither the socket nor a
// "connection closed" callback (Request::is_connection_closed came in later versions), only the
// connection's addresses. A TCP connection is unique by its address pair, so the handler finds
// its socket among the process's descriptors by those addresses and watches it for the peer's
// FIN or a reset.
#pragma once

#include <optional>
#include <string>

namespace deskside::server {

class ConnectionWatch {
   public:
    // The open TCP socket of this process whose local port and peer address are these, or
    // nullopt when there is none (the watch then never reports a disconnect).
    static std::optional<ConnectionWatch> find(int local_port, const std::string& remote_addr, int remote_port);

    // True once the peer has closed or reset the connection. Data the peer sent and nobody read
    // yet (a pipelined request) is not a close. A client that only shuts down its sending side
    // counts as gone: HTTP clients do not half-close while waiting for a response.
    bool peer_closed() const;

    int fd() const { return fd_; }

   private:
    explicit ConnectionWatch(int fd) : fd_(fd) {}
    int fd_;  // not owned: httplib closes it after the handler returns
};

}  // namespace deskside::server
