#!/usr/bin/env python3
"""upstream.py: a plain server outside diehard, for the replicas' outbound
connections to reach (tests/outbound.bats). Every connection it takes is
one line of LOG (JSON: its number, the peer's address, the bytes it got),
written before the server replies (http) or closes it (line), so a client
that has its reply finds the line there.

  upstream.py PORTFILE LOG [http|line] [HOST]

Binds HOST (default 127.0.0.1; "::" takes IPv4 too) on a free port, writes
the port to PORTFILE once it listens, and serves each connection in a
thread:
  http  reads a request's head (to the blank line), answers
        "HTTP/1.0 200 OK" with the body "reply N\\n" (N: the connection's
        number) and closes;
  line  answers each line L with "got L\\n" until the client's end, then
        closes.
"""
import json
import os
import socket
import sys
import threading

lock = threading.Lock()
count = 0


def serve(conn, peer, n, mode, log):
    got = b""
    try:
        if mode == "http":
            while b"\r\n\r\n" not in got:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                got += chunk
            body = b"reply %d\n" % n
            # Logged before the reply: a client that has it finds its line.
            with lock:
                with open(log, "a") as out:
                    out.write(json.dumps({"n": n, "peer": peer[0], "got": got.decode("latin-1")}) + "\n")
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(body), body))
        else:
            f = conn.makefile("rb")
            for line in f:
                got += line
                conn.sendall(b"got " + line.rstrip(b"\n") + b"\n")
    except OSError:
        pass
    if mode != "http":
        # Logged before the close: a client that read to the end finds it.
        with lock:
            with open(log, "a") as out:
                out.write(json.dumps({"n": n, "peer": peer[0], "got": got.decode("latin-1")}) + "\n")
    conn.close()


def main():
    global count
    portfile, log = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "http"
    host = sys.argv[4] if len(sys.argv) > 4 else "127.0.0.1"
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    srv = socket.socket(fam, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if fam == socket.AF_INET6:
        srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    srv.bind((host, 0))
    srv.listen(128)
    tmp = portfile + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    os.rename(tmp, portfile)
    while True:
        conn, peer = srv.accept()
        with lock:
            count += 1
            n = count
        threading.Thread(target=serve, args=(conn, peer, n, mode, log), daemon=True).start()


main()
