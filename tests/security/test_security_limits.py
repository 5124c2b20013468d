"""Clients that try to take the server down by holding on: slowloris, many connections, chunked
floods, a port taken twice, a client that half-closes, and shutdown with clients still trickling."""
import json
import signal
import socket
import subprocess
import threading
import time

import requests

from hostile import BODY_TIMEOUT, MAX_BODY, MAX_CLIENT_CONNS, connect, expect_error, healthy, read_response, wait_for
from serve_helpers import STORIES, deskside_binary


def completion_request(body, stream=False):
    data = json.dumps(dict({"model": "stories260K", "prompt": "Once", "max_tokens": 8, "temperature": 0}, **body,
                           stream=stream)).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(data)) + data


def test_chunked_body_is_limited_while_it_arrives(hard):
    """Defect 3: --max-body holds for a chunked body, refused while it still arrives."""
    with connect(hard.port) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (10000, b"x" * 10000)
        sent = 0
        for _ in range(400):  # up to 4 MB, 40 times the limit
            try:
                s.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 10000
            s.settimeout(0.0)
            try:
                if s.recv(1, socket.MSG_PEEK):
                    break
            except BlockingIOError:
                pass
            finally:
                s.settimeout(10)
        refused = read_response(s)
    # The body never ended (no last chunk): a server that reads it all before judging never answers.
    expect_error(refused, 413)
    assert sent > MAX_BODY
    assert healthy(hard)


def test_slowloris_leaves_the_server_serving(hard):
    """Defect 5: connections trickling their headers hold no worker, get 408 at the deadline,
    and /health and real requests are answered meanwhile."""
    n = 80  # more than the server's HTTP threads
    socks = [connect(hard.port) for _ in range(n)]
    stop = threading.Event()

    def trickle():
        for i in range(40):
            for s in socks:
                try:
                    s.send(b"GET /health HTTP/1.1\r\nX-a: "[i:i + 1] or b"a")
                except OSError:
                    pass
            if stop.wait(0.1):
                return

    t = threading.Thread(target=trickle)
    t.start()
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        assert healthy(hard, timeout=2)
        r = requests.post(hard.url + "/v1/completions", json={"model": "stories260K", "prompt": "Once", "max_tokens": 4},
                          timeout=10)
        assert r.status_code == 200
        assert time.monotonic() - t0 < 3
        # The head deadline ends each of them with a 408.
        timed_out = 0
        for s in socks:
            r = read_response(s)
            timed_out += r is not None and r.status == 408
        assert timed_out == n
    finally:
        stop.set()
        t.join()
        for s in socks:
            s.close()
    assert healthy(hard)


def test_body_deadline(hard):
    """Defect 5: a body that trickles is cut off at --body-timeout."""
    with connect(hard.port) as s:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{")
        t0 = time.monotonic()
        r = read_response(s)
    expect_error(r, 408)
    assert BODY_TIMEOUT - 0.2 < time.monotonic() - t0 < BODY_TIMEOUT + 1.5


def test_connections_per_client_are_capped(hard):
    """Defect 5: past --max-client-conns a client gets 429, and /health still answers."""
    socks = [connect(hard.port) for _ in range(MAX_CLIENT_CONNS)]
    try:
        time.sleep(0.2)
        with connect(hard.port) as extra:
            expect_error(read_response(extra), 429)
    finally:
        for s in socks:
            s.close()
    assert wait_for(lambda: healthy(hard), 5)


def test_listen_backlog(hard):
    """Defect 6: the backlog (ss's Send-Q of a listener) is at least 1024, not 5."""
    out = subprocess.run(["ss", "-Hltn", f"sport = :{hard.port}"], capture_output=True, text=True, check=True).stdout
    backlogs = [int(line.split()[2]) for line in out.splitlines() if line.strip()]
    assert backlogs and min(backlogs) >= 1024, out


def test_a_taken_port_fails_at_start(hard):
    """Defect 7: a second server on the same port exits with 'address already in use'."""
    p = subprocess.run([str(deskside_binary()), "serve", "-m", str(STORIES), "--port", str(hard.port)],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert "address already in use" in p.stderr.lower(), p.stderr
    assert healthy(hard)


def test_half_closed_client_gets_its_response(hard):
    """Defect 11: a client that shuts down its sending side after the request still gets the
    response, streamed or not."""
    for stream in (False, True):
        with connect(hard.port) as s:
            s.sendall(completion_request({}, stream=stream))
            s.shutdown(socket.SHUT_WR)
            r = read_response(s)
        assert r is not None and r.status == 200, r and r.body
        if stream:
            assert r.body.rstrip().endswith(b"data: [DONE]")
        else:
            assert r.json()["usage"]["completion_tokens"] == 8


def test_shutdown_grace_closes_connections_and_health_drains(start_server):
    """Defect 9: while draining /health is 503 {"status":"draining"}; after --shutdown-grace the
    server closes every connection, a trickling one included, and exits."""
    grace = 1.5
    s = start_server(STORIES, "--parallel", 1, "--ctx-size", 2048, "--shutdown-grace", grace, "--header-timeout", 30)
    body = {"model": "stories260K", "prompt": "Once", "max_tokens": 2000, "ignore_eos": True, "stream": True}
    streams = [requests.post(s.url + "/v1/completions", json=body, stream=True, timeout=30) for _ in range(3)]
    next(streams[0].iter_lines())
    trickler = connect(s.port)
    trickler.sendall(b"GET /health HTTP/1.1\r\n")
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    draining = None
    while time.monotonic() - t0 < grace and draining is None:
        try:
            r = requests.get(s.url + "/health", timeout=2)
        except requests.ConnectionError:
            break  # gone: the drain ended before a poll saw it
        if r.status_code == 503:
            draining = r
    assert draining is not None and draining.json() == {"status": "draining"}
    s.proc.wait(timeout=grace + 8)
    assert time.monotonic() - t0 < grace + 5
    trickler.settimeout(2)
    assert trickler.recv(100) == b""
    trickler.close()
    for r in streams:
        r.close()
    assert s.proc.returncode == 0
