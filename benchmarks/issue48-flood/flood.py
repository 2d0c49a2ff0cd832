#!/usr/bin/env python3
"""A flood of GETs from N distinct IPv6 clients of one /48 (2001:db8:77::/48), each
named by X-Forwarded-For (the server trusts loopback to name its clients), pipelined
on a few keep-alive connections, round after round for SECONDS: every address asks
again and again, so past its burst each is refused. Prints the answers by status, as
JSON.

    flood.py PORT [N=100000] [SECONDS=30] [CONNECTIONS=4]
"""
import json
import socket
import sys
import threading
import time


def addresses(n):
    # Spread over every /64 of the /48 (65,536 of them), then a second address in each.
    for i in range(n):
        yield "2001:db8:77:%x:%x::1" % (i & 0xFFFF, i >> 16)


def worker(port, addrs, until, counts, lock):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)
    reqs = [
        ("GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: %s\r\n\r\n" % a).encode()
        for a in addrs
    ]
    mine = {}
    while time.time() < until:
        for start in range(0, len(reqs), 200):
            batch = reqs[start : start + 200]
            s.sendall(b"".join(batch))
            want, got, buf = len(batch), 0, b""
            while got < want:
                d = s.recv(1 << 20)
                if not d:
                    raise SystemExit("the server closed a flood connection")
                buf += d
                # Each answer is a head and a body of 6 or 22 bytes: count heads whole.
                while True:
                    i = buf.find(b"\r\n\r\n")
                    if i < 0:
                        break
                    head = buf[:i].decode("latin-1")
                    length = 0
                    for line in head.split("\r\n")[1:]:
                        k, _, v = line.partition(":")
                        if k.lower() == "content-length":
                            length = int(v)
                    if len(buf) < i + 4 + length:
                        break
                    status = head.split(" ", 2)[1]
                    mine[status] = mine.get(status, 0) + 1
                    buf = buf[i + 4 + length :]
                    got += 1
    with lock:
        for k, v in mine.items():
            counts[k] = counts.get(k, 0) + v


def main():
    port = int(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 30
    conns = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    addrs = list(addresses(n))
    counts, lock = {}, threading.Lock()
    t = time.time()
    threads = [
        threading.Thread(target=worker, args=(port, addrs[k::conns], t + seconds, counts, lock))
        for k in range(conns)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    took = time.time() - t
    total = sum(counts.values())
    print(json.dumps({"clients": n, "requests": total, "seconds": round(took, 2),
                      "per_second": round(total / took), "statuses": counts}))


main()
