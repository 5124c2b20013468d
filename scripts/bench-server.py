"""The client side of scripts/bench-server.sh: C concurrent clients, each sending R streamed
/v1/completions requests one after another, with a fixed prompt length and a fixed output length
(ignore_eos and max_tokens, which deskside and llama.cpp's llama-server both take), against one
server. Prints one JSON line: aggregate generated tokens/s over the wall time, and the
time-to-first-token percentiles.

Every request's prompt starts with a different token (after BOS), so no server can reuse another
request's prompt: both compute every prompt in full.

usage: bench-server.py --url URL --model ID --clients C --requests R --prompt-tokens P
                       --max-tokens N [--vocab V] [--bos ID] [--label NAME]
"""
import argparse
import json
import random
import statistics
import sys
import threading
import time

import requests


def percentile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def one_request(session, args, prompt):
    """Streams one completion; returns (ttft seconds, generated tokens)."""
    body = {"model": args.model, "prompt": prompt, "max_tokens": args.max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": True}
    t0 = time.perf_counter()
    ttft = None
    finish = None
    # A fresh connection per request: llama-server may close a kept-alive connection after a
    # stream, and the next request on it then fails with RemoteDisconnected.
    with session.post(args.url + "/v1/completions", json=body, stream=True, timeout=600,
                      headers={"Connection": "close"}) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{args.url}: HTTP {r.status_code}: {r.text[:300]}")
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(f"{args.url}: {chunk['error']}")
            choices = chunk.get("choices") or []
            if not choices:
                continue
            if ttft is None and choices[0].get("text"):
                ttft = time.perf_counter() - t0
            finish = choices[0].get("finish_reason") or finish
    if finish != "length":
        raise RuntimeError(f"{args.url}: finish_reason {finish!r}, expected 'length' (ignore_eos not honoured?)")
    # Stopped for length with end-of-generation banned: exactly max_tokens were generated (chunks
    # are not tokens: a piece that ends inside a UTF-8 character is held back and merged).
    return ttft if ttft is not None else time.perf_counter() - t0, args.max_tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--prompt-tokens", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--vocab", type=int, default=32000, help="token ids are drawn below this")
    ap.add_argument("--bos", type=int, default=None, help="BOS id to start each prompt with")
    ap.add_argument("--label", default="")
    args = ap.parse_args()

    rng = random.Random(1234)
    body = [rng.randrange(100, args.vocab) for _ in range(args.prompt_tokens)]
    head = [args.bos] if args.bos is not None else []

    def prompt(i):
        p = head + [100 + i % (args.vocab - 100)] + body
        return p[:args.prompt_tokens]

    ttfts, generated, errors = [], [0], []
    lock = threading.Lock()

    def client(c):
        session = requests.Session()
        try:
            for r in range(args.requests):
                t, n = one_request(session, args, prompt(c * args.requests + r))
                with lock:
                    ttfts.append(t)
                    generated[0] += n
        except Exception as e:  # noqa: BLE001 - reported below, the run fails
            with lock:
                errors.append(str(e))

    # One warm-up request (page faults, thread pools) outside the measurement.
    one_request(requests.Session(), args, prompt(10_000))
    threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        sys.exit(f"bench-server.py: {len(errors)} clients failed: {errors[0]}")
    print(json.dumps({"label": args.label, "clients": args.clients, "requests": args.clients * args.requests,
                      "prompt_tokens": args.prompt_tokens, "max_tokens": args.max_tokens, "wall_s": round(wall, 3),
                      "tokens_per_s": round(generated[0] / wall, 2),
                      "ttft_p50_ms": round(1000 * percentile(ttfts, 0.5), 1),
                      "ttft_p99_ms": round(1000 * percentile(ttfts, 0.99), 1),
                      "ttft_mean_ms": round(1000 * statistics.fmean(ttfts), 1)}))


if __name__ == "__main__":
    main()
