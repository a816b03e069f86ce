#!/usr/bin/python3
"""Abuse and soak test of `turboquant serve` (docs/RELIABILITY.md), standard library only.

  scripts/serve_abuse.py [--model DIR] [--soak-seconds 600] [--connections 1000] [--json]

Starts the server on a free port, then: malformed JSON bodies, a body over the limit, slowloris
(connections that send their headers one byte at a time), N concurrent connections at once,
clients that hang up in the middle of a stream, wrong API keys; after each the server must answer
/health and a real completion. Then a soak of well-formed and abusive requests mixed, with the
resident set (VmRSS) sampled after warm-up and at the end: it must stay within 5%.
Exit 0 when every check passes; the figures go to stdout (one JSON object with --json).
"""
import argparse
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "abuse-test-key"


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    def __init__(self, binary, model, port):
        self.port = port
        self.proc = subprocess.Popen(
            [binary, "serve", "-m", model, "--port", str(port), "--api-key", KEY, "-c", "512",
             "--parallel", "4", "--max-queue", "64", "--max-body-mib", "1", "--log-format", "none"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise SystemExit(f"serve did not start: {line}{self.proc.stderr.read()}")

    def request(self, method, path, body=None, key=KEY, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def healthy(self):
        try:
            status, _ = self.request("GET", "/health", key=None, timeout=30)
            if status != 200:
                return False
            body = json.dumps({"prompt": "Once upon a time", "max_tokens": 4})
            status, data = self.request("POST", "/v1/completions", body)
            return status == 200 and json.loads(data)["usage"]["completion_tokens"] == 4
        except OSError:  # timed out or refused: not healthy
            return False

    def stop(self):
        self.proc.terminate()
        return self.proc.wait(timeout=60)


MALFORMED = [b'{"prompt": "unterminated', b"[]", b'{"prompt": 42}', b"\x00\x01\xff",
             b'{"messages": [{"role": "user"}]}', b'{"prompt": "x", "max_tokens": -5}',
             b'{"prompt": "x", "temperature": "hot"}', b"", b"{" * 100000, b'{"prompt": [99999999]}']


def malformed(s):
    statuses = set()
    for body in MALFORMED:
        status, _ = s.request("POST", "/v1/completions", body)
        statuses.add(status)
    return {"bodies": len(MALFORMED), "statuses": sorted(statuses),
            "ok": statuses <= {400, 413, 404}}


def huge_body(s):
    body = b'{"prompt": "' + b"a" * (3 << 20) + b'"}'
    try:
        status, _ = s.request("POST", "/v1/completions", body)
    except (ConnectionError, OSError):
        status = "closed"  # the server may close after answering 413 to an unread body
    return {"bytes": len(body), "status": status, "ok": status in (413, "closed")}


def slowloris(s, n=200, seconds=10):
    socks = []
    for _ in range(n):
        try:
            k = socket.create_connection(("127.0.0.1", s.port), timeout=5)
            k.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
            socks.append(k)
        except OSError:
            break
    t0 = time.time()
    answered = 0
    while time.time() - t0 < seconds:
        for k in socks:
            try:
                k.send(b"X")
            except OSError:
                pass
        answered += s.healthy()
        time.sleep(0.5)
    for k in socks:
        k.close()
    return {"connections": len(socks), "seconds": seconds, "healthy_while_held": answered,
            "ok": answered > 0 and len(socks) == n}


def concurrent(s, n):
    results = []
    lock = threading.Lock()

    def one():
        try:
            status, _ = s.request("GET", "/v1/models", timeout=120)
        except OSError as e:
            status = type(e).__name__
        with lock:
            results.append(status)

    threads = [threading.Thread(target=one) for _ in range(n)]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = sum(1 for r in results if r == 200)
    return {"connections": n, "ok_responses": ok, "seconds": round(time.time() - t0, 2),
            "others": sorted({str(r) for r in results if r != 200}), "ok": ok == n}


def disconnects(s, n=50):
    body = json.dumps({"prompt": "The history of", "max_tokens": 200, "stream": True})
    for _ in range(n):
        k = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        req = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}")
        k.send(req.encode())
        k.recv(512)  # the headers and a first event
        k.close()
    return {"streams_cut": n, "ok": True}


def wrong_keys(s, n=100):
    statuses = set()
    for i in range(n):
        status, _ = s.request("GET", "/v1/models", key=("wrong" * (i % 7)) or None, timeout=30)
        statuses.add(status)
    return {"requests": n, "statuses": sorted(statuses), "ok": statuses == {401}}


def soak(s, seconds):
    s.healthy()
    time.sleep(1)
    rss0 = rss_bytes(s.proc.pid)
    t0 = time.time()
    n = 0
    while time.time() - t0 < seconds:
        malformed(s)
        wrong_keys(s, 10)
        disconnects(s, 4)
        for _ in range(4):
            s.healthy()
        n += 1
    time.sleep(1)
    rss1 = rss_bytes(s.proc.pid)
    growth = (rss1 - rss0) / rss0
    return {"seconds": seconds, "rounds": n, "rss_start_mib": round(rss0 / 2**20, 1),
            "rss_end_mib": round(rss1 / 2**20, 1), "growth_percent": round(100 * growth, 2),
            "ok": growth <= 0.05}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models/tq-llama-21m"))
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/release/src/cli/turboquant"))
    ap.add_argument("--soak-seconds", type=float, default=60)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    # Room for --connections sockets on both sides (the server inherits the limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    s = Server(a.binary, a.model, free_port())
    report = {}
    try:
        for name, fn in [("malformed_json", malformed), ("huge_body", huge_body),
                         ("slowloris", slowloris),
                         ("concurrent", lambda s: concurrent(s, a.connections)),
                         ("disconnect_mid_stream", disconnects), ("wrong_keys", wrong_keys)]:
            r = fn(s)
            r["healthy_after"] = s.healthy()
            r["ok"] = r["ok"] and r["healthy_after"]
            report[name] = r
            if not a.json:
                print(f"{name}: {r}", flush=True)
        report["soak"] = soak(s, a.soak_seconds)
        if not a.json:
            print(f"soak: {report['soak']}", flush=True)
    finally:
        report["exit_status"] = s.stop()
    ok = all(r["ok"] for k, r in report.items() if isinstance(r, dict))
    report["ok"] = ok and report["exit_status"] == 0
    if a.json:
        print(json.dumps(report))
    else:
        print("PASS" if report["ok"] else "FAIL")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
