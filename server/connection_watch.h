// Noticing that an HTTP client went away while its non-streamed request is still generating.
//
// A streamed response notices a disconnect when a write fails, but a non-streamed one writes
// nothing until the end. Debian's cpp-httplib (0.11) hands a handler neither the socket nor a
// "connection closed" callback (Request::is_connection_closed came in later versions), only the
// connection's addresses. A TCP connection is unique by its address pair, so the handler finds
// its socket among the process's descriptors by those addresses and watches it for the peer's
// FIN or a reset.
//
// A FIN alone does not say the client is gone: one that shuts down only its sending side after the
// request (`nc -N`, scripts) still waits for the response. On the first FIN the watch sends an
// interim "HTTP/1.1 100 Continue", which every HTTP/1.1 client must read past (RFC 9110 15.2): a
// socket the client closed answers it with a reset, a half-closed one takes it. HTTP/1.0 clients
// must not get interim responses, so for them a FIN stays a close (the transport marks them).
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
    // yet (a pipelined request) is not a close, nor is a half-close of an HTTP/1.1 client (after
    // the probe above, so a closed peer is seen one check later).
    bool peer_closed() const;

    int fd() const { return fd_; }

    // Marks the socket as carrying an HTTP/1.0 request (no probe), or clears the mark.
    static void set_http10(int fd, bool http10);

   private:
    explicit ConnectionWatch(int fd) : fd_(fd) {}
    int fd_;  // not owned: the transport closes it after the response
    mutable bool probed_ = false;
};

}  // namespace deskside::server
