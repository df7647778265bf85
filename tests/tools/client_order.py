"""tests/tools/client_order.py — the probe of bench/client_order and of
tests/tcp.bats's --serial-clients test.

`server PORT lt|et`: a single-threaded server on select.epoll that answers
each line a client sends with the number of lines it has taken so far, over
all its clients: a reply that depends on the order in which it takes its
clients' requests, as redis's LPUSH length does. lt: level-triggered, one
recv an event (as redis reads); et: edge-triggered, recv until EAGAIN.

`client PORT CLIENTS ROUNDS`: CLIENTS connections, each sending a line and
waiting for its answer, ROUNDS times. Prints `closed N`: connections that
ended before their last answer (diehard closes a connection whose replicas
leave no majority), then `answers 1..N each once` when every line was
answered and the answers over all clients are 1 to CLIENTS x ROUNDS (else
`answers not 1..N each once`)."""
import select
import selectors
import socket
import sys


def server(port, mode):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(512)
    ls.setblocking(False)
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN)
    flag = select.EPOLLIN | (select.EPOLLET if mode == "et" else 0)
    conns, bufs, taken = {}, {}, 0
    while True:
        for fd, _ in ep.poll():
            if fd == ls.fileno():
                while True:
                    try:
                        c, _ = ls.accept()
                    except BlockingIOError:
                        break
                    c.setblocking(False)
                    conns[c.fileno()] = c
                    bufs[c.fileno()] = b""
                    ep.register(c.fileno(), flag)
                continue
            c = conns[fd]
            while True:
                try:
                    d = c.recv(4096)
                except BlockingIOError:
                    break
                if not d:
                    ep.unregister(fd)
                    c.close()
                    del conns[fd]
                    break
                bufs[fd] += d
                while b"\n" in bufs[fd]:
                    _, bufs[fd] = bufs[fd].split(b"\n", 1)
                    taken += 1
                    c.sendall(b"%d\n" % taken)
                if mode == "lt":
                    break


def client(port, nclients, rounds):
    sel = selectors.DefaultSelector()
    left, bufs = {}, {}
    for _ in range(nclients):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        s.sendall(b"x\n")
        left[s] = rounds
        bufs[s] = b""
        sel.register(s, selectors.EVENT_READ)
    closed, answers = 0, []
    while left:
        events = sel.select(timeout=30)
        if not events:
            sys.exit("client_order.py: no answer for 30 s")
        for key, _ in events:
            s = key.fileobj
            try:
                d = s.recv(4096)
            except ConnectionResetError:
                d = b""
            if d:
                bufs[s] += d
                if b"\n" not in bufs[s]:
                    continue
                line, bufs[s] = bufs[s].split(b"\n", 1)
                answers.append(int(line))
                left[s] -= 1
                if left[s] > 0:
                    s.sendall(b"x\n")
                    continue
            else:
                closed += 1
            sel.unregister(s)
            s.close()
            del left[s]
    # Every line answered, the server's counts over all clients are 1..N,
    # each once, whatever the order it took them in.
    ok = closed == 0 and sorted(answers) == list(range(1, nclients * rounds + 1))
    print("closed", closed, "answers", "1..%d each once" % (nclients * rounds) if ok else "not 1..N each once")


if __name__ == "__main__":
    if sys.argv[1] == "server":
        server(int(sys.argv[2]), sys.argv[3])
    else:
        client(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
