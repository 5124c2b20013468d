"""The bad-input table: malformed, hostile or oversized requests, each answered with its status
code in OpenAI's error shape, and /health still answering afterwards."""
import json

import pytest

from hostile import MAX_BODY, MAX_HEADERS, MAX_HEADER_BYTES, expect_error, healthy, post_bytes, raw

COMP = b'{"model": "stories260K", "prompt": "Once", "max_tokens": 2'


def deep(depth):
    return b'{"model": "stories260K", "prompt": ' + b"[" * depth + b"]" * depth + b"}"


def chunked(body, size=4096):
    out = b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" \
          b"Transfer-Encoding: chunked\r\n\r\n"
    for i in range(0, len(body), size):
        out += b"%x\r\n" % len(body[i:i + size]) + body[i:i + size] + b"\r\n"
    return out + b"0\r\n\r\n"


ROWS = [
    ("malformed JSON", post_bytes("/v1/completions", b"{not json"), 400),
    ("truncated JSON", post_bytes("/v1/completions", COMP), 400),
    ("JSON that is not an object", post_bytes("/v1/chat/completions", b"[1, 2]"), 400),
    ("nesting 200 deep", post_bytes("/v1/completions", deep(200)), 400),
    ("nesting 40000 deep", post_bytes("/v1/completions", deep(40000)), 400),
    ("1e400", post_bytes("/v1/completions", COMP + b', "temperature": 1e400}'), 400),
    ("-1e400", post_bytes("/v1/completions", COMP + b', "top_p": -1e400}'), 400),
    ("a 400-digit integer", post_bytes("/v1/completions", COMP[:-1] + b"9" * 400 + b"}"), 400),
    ("invalid UTF-8 in a string", post_bytes("/v1/completions", b'{"model": "stories260K", "prompt": "\xff\xfe"}'), 400),
    ("a lone surrogate escape", post_bytes("/v1/completions", b'{"model": "stories260K", "prompt": "\\ud800"}'), 400),
    ("NUL in the body", post_bytes("/v1/completions", b'{"model": "stories260K", "prompt": "a\x00"}'), 400),
    ("a body over --max-body", post_bytes("/v1/completions", b"x" * (MAX_BODY + 1)), 413),
    ("a chunked body over --max-body", chunked(b'{"prompt": "' + b"x" * (MAX_BODY + 10) + b'"}'), 413),
    ("a header over --max-header-bytes",
     post_bytes("/v1/completions", COMP + b"}", extra=b"X-Big: " + b"a" * MAX_HEADER_BYTES + b"\r\n"), 431),
    ("more headers than --max-headers",
     post_bytes("/v1/completions", COMP + b"}", extra=b"".join(b"X-%d: 1\r\n" % i for i in range(MAX_HEADERS + 1))), 431),
    ("a request line over 8 KiB", b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    ("Content-Length and Transfer-Encoding",
     post_bytes("/v1/completions", COMP + b"}", extra=b"Transfer-Encoding: chunked\r\n"), 400),
    ("two Content-Lengths", post_bytes("/v1/completions", COMP + b"}", extra=b"Content-Length: 3\r\n"), 400),
    ("a negative Content-Length", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400),
    ("a transfer coding other than chunked",
     b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ("a compressed body", post_bytes("/v1/completions", b"\x1f\x8b", extra=b"Content-Encoding: gzip\r\n"), 415),
    ("a bad chunk size", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    ("HTTP/2.0 on the request line", b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    ("no version on the request line", b"GET /health\r\nHost: x\r\n\r\n", 400),
    ("a bare LF", b"GET /health HTTP/1.1\nHost: x\n\n", 400),
    ("no Host in HTTP/1.1", b"GET /health HTTP/1.1\r\n\r\n", 400),
    ("a control byte in a header", b"GET /health HTTP/1.1\r\nHost: x\r\nX: a\x01b\r\n\r\n", 400),
    ("a folded header", b"GET /health HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", 400),
    ("an expectation other than 100-continue", b"GET /health HTTP/1.1\r\nHost: x\r\nExpect: x\r\n\r\n", 417),
    ("an empty stop string", post_bytes("/v1/completions", COMP + b', "stop": ""}'), 400),
    ("an empty stop string in chat", post_bytes(
        "/v1/chat/completions",
        b'{"model": "stories260K", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stop": ""}'), 400),
    ("more completions than the queue can ever hold",
     post_bytes("/v1/completions", b'{"model": "stories260K", "prompt": ["a", "b", "c", "d", "e", "f", "g", "h", "i", '
                b'"j"], "max_tokens": 1, "n": 16}'), 400),
]


@pytest.mark.parametrize("data,status", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_bad_input(hard, data, status):
    expect_error(raw(hard.port, data), status)
    assert healthy(hard)


def test_numbers_json_can_hold_are_still_judged_by_range(hard):
    err = expect_error(raw(hard.port, post_bytes("/v1/completions", COMP + b', "temperature": 1e300}')), 400)
    assert err["param"] == "temperature"


def test_nesting_that_requests_need_is_accepted(hard):
    body = {"model": "stories260K", "prompt": "Once", "max_tokens": 2, "stop": ["x"], "logit_bias": {"5": 1}}
    r = raw(hard.port, post_bytes("/v1/completions", json.dumps(body).encode()))
    assert r.status == 200, r.body
