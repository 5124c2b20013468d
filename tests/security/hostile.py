"""Raw-socket HTTP for the hostile-client suite: send exactly these bytes, read the response
(skipping interim 1xx ones), and check OpenAI's error shape."""
import json
import socket
import time

import requests

# The limits the `hard` server runs with (conftest.py), which the tests read.
MAX_BODY = 100_000
MAX_HEADER_BYTES = 8192
MAX_HEADERS = 50
HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 2.0
MAX_CLIENT_CONNS = 100
CORS_ORIGIN = "http://app.example"
ALLOWED_HOST = "desk.example"


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def recv_some(s):
    chunk = s.recv(65536)
    if not chunk:
        raise ConnectionError("the server closed the connection inside a chunked response")
    return chunk


def read_response(s):
    """The next final response on `s` (None when the server closed first)."""
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, socket.timeout):
                chunk = b""
            if not chunk:
                return None
            buf += chunk
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        if 100 <= status < 200:
            continue
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                while b"\r\n" not in buf:
                    buf += recv_some(s)
                size_line, buf = buf.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(buf) < size + 2:
                    buf += recv_some(s)
                body, buf = body + buf[:size], buf[size + 2:]
                if size == 0:
                    return Response(status, headers, body)
        length = int(headers.get("content-length", "0"))
        while len(buf) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return Response(status, headers, buf[:length])


def raw(port, data, timeout=10):
    """Sends `data` on a fresh connection and returns the response."""
    with connect(port, timeout) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while sending: the response is already on its way
        return read_response(s)


def post_bytes(path, body, content_type="application/json", extra=b""):
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n").encode()
    if content_type:
        head += f"Content-Type: {content_type}\r\n".encode()
    return head + extra + b"\r\n" + body


def expect_error(r, status):
    """An OpenAI-shaped error with this status."""
    assert r is not None, "the server closed the connection without a response"
    assert r.status == status, (r.status, r.body[:300])
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


def healthy(server, timeout=2.0):
    """GET /health answers 200 within `timeout` seconds."""
    try:
        return requests.get(server.url + "/health", timeout=timeout).status_code == 200
    except requests.RequestException:
        return False


def wait_for(cond, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False
