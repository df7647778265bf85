#!/usr/bin/env python3
"""A threaded TCP server whose replies carry a thread's own clock read.

thread_clock_server.py PORT: listens on 127.0.0.1:PORT with a backlog of 1
and starts a thread per connection; the thread reads one line and answers
with the wall-clock time it read, in nanoseconds, and closes.

Under diehard a server's wall-clock reads are matched per thread (docs/
NETWORK.md): the n-th read of thread number j gets what thread j's n-th
read got in the replica that made it first. Each reply is that exact value,
so a replica whose threads are numbered otherwise than its siblings' (it
took the connections in another order, or missed one) answers with another
request's time and is outvoted at once, not only when a second turns.
"""
import socket
import sys
import threading
import time


def serve(conn):
    with conn:
        conn.recv(100)
        conn.sendall(b"%d\n" % time.time_ns())


def main():
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", int(sys.argv[1])))
    s.listen(1)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
