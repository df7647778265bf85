#!/usr/bin/env python3
"""lineclient.py: clients of line_server and buggy_server (tests/progs/line_server.c)
for tests/tcp.bats, each bounded in time.

    lineclient.py pattern N                 BIG N's reply, on stdout
    lineclient.py send PORT CMD...          one connection; each command sent after
                                            the reply to the one before; the replies
                                            on stdout (BIG n: n bytes, else a line);
                                            @sleep=SECONDS waits there
    lineclient.py halfclose PORT            stdin sent, the write side shut
                                            (SHUT_WR), the reply read to EOF, on stdout
    lineclient.py load PORT N               N requests, each on a connection of its
                                            own (SET, then GET from another
                                            connection, then INCR), every reply checked
    lineclient.py many PORT N               N connections open at once, a request on
                                            each, every reply read and checked
    lineclient.py disconnect PORT N KEEP [rst]
                                            BIG N, KEEP bytes read, then closed (with
                                            rst: SO_LINGER 0, a reset)
    lineclient.py garbage PORT BYTES        random bytes sent, write side shut, replies
                                            read until EOF or 5 s; never fails on them
    lineclient.py long PORT BYTES           a line of BYTES (over 1 MiB) without its
                                            newline: ERR line too long, then EOF
    lineclient.py bugcheck PORT V           buggy_server's sequence: V keys set to
                                            15-byte values, INCR of 999999999999999,
                                            every key read back one round trip each;
                                            prints "right", or "wrong: ..." (exit 1)
    lineclient.py bugrate SERVER LIB N V    bugcheck against SERVER preloaded with LIB
                                            (DIEHARD_FILL=random), DIEHARD_SEED 1..N;
                                            prints how many seeds gave a wrong answer

Exit status 0 when every reply was right, 1 when one was wrong, 2 on a
connection error or a time-out (every socket has one: 20 s by default,
LINECLIENT_TIMEOUT to change it).
"""
import os
import random
import resource
import selectors
import socket
import subprocess
import sys
import time

TIMEOUT = float(os.environ.get("LINECLIENT_TIMEOUT", "20"))


def pattern(n):
    """The bytes of BIG n (line_server.c)."""
    lines = [bytes(97 + (i + j) % 26 for i in range(63)) + b"\n" for j in range(26)]
    block = b"".join(lines)  # 26 lines: the pattern's period
    whole, rest = divmod(n, len(block))
    out = block * whole + block[:rest]
    return out[:-1] + b"\n" if n else b""


class Wrong(Exception):
    pass


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    s.settimeout(TIMEOUT)
    return s


class Conn:
    """A connection that reads replies: lines, or counted bytes."""

    def __init__(self, port):
        self.s = connect(port)
        self.buf = b""

    def line(self):
        while b"\n" not in self.buf:
            b = self.s.recv(65536)
            if not b:
                raise Wrong("connection closed before a whole reply (got %r)" % self.buf[:200])
            self.buf += b
        i = self.buf.index(b"\n") + 1
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def exactly(self, n):
        chunks = [self.buf[:n]]
        got = len(chunks[0])
        self.buf = self.buf[n:]
        while got < n:
            b = self.s.recv(min(1 << 20, n - got))
            if not b:
                raise Wrong("connection closed after %d of %d bytes" % (got, n))
            chunks.append(b)
            got += len(b)
        return b"".join(chunks)

    def ask(self, cmd):
        self.s.sendall(cmd.encode() + b"\n")
        if cmd.startswith("BIG ") and cmd[4:].isdigit() and int(cmd[4:]) > 0:
            return self.exactly(int(cmd[4:]))
        return self.line()

    def close(self):
        self.s.close()


def expect(got, want, what):
    if got != want:
        raise Wrong("%s: got %r, expected %r" % (what, got[:200], want[:200]))


def cmd_send(port, cmds):
    c = Conn(port)
    for cmd in cmds:
        if cmd.startswith("@sleep="):
            time.sleep(float(cmd[7:]))
            continue
        sys.stdout.buffer.write(c.ask(cmd))
        sys.stdout.buffer.flush()
    c.close()


def cmd_halfclose(port):
    s = connect(port)
    s.sendall(sys.stdin.buffer.read())
    s.shutdown(socket.SHUT_WR)
    while True:
        b = s.recv(65536)
        if not b:
            break
        sys.stdout.buffer.write(b)
    s.close()


def cmd_load(port, n):
    tag = "%d-%d" % (os.getpid(), int(time.time() * 1000) % 100000)
    for i in range(n):
        key = "load-%s-%d" % (tag, i // 3)
        c = Conn(port)
        if i % 3 == 0:
            expect(c.ask("SET %s value-%d" % (key, i)), b"OK\n", "SET %s" % key)
        elif i % 3 == 1:
            expect(c.ask("GET " + key), b"value-%d\n" % (i - 1), "GET %s from another connection" % key)
        else:
            expect(c.ask("INCR n-" + key), b"1\n", "INCR n-%s" % key)
        c.close()
    print("%d requests answered right" % n)


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            raise SystemExit("lineclient: need %d descriptors, the hard limit is %d" % (need, hard))
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def cmd_many(port, n):
    raise_nofile(n + 64)
    socks = []
    for i in range(n):
        s = connect(port)
        socks.append(s)
    # Every connection is open before any request is sent.
    for i, s in enumerate(socks):
        s.sendall(b"ECHO connection %d of %d\n" % (i, n))
    sel = selectors.DefaultSelector()
    got = {}
    for i, s in enumerate(socks):
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, i)
        got[i] = b""
    deadline = time.monotonic() + TIMEOUT
    left = n
    while left:
        t = deadline - time.monotonic()
        if t <= 0:
            raise SystemExit("lineclient many: %d of %d replies missing after %.0f s" % (left, n, TIMEOUT))
        for key, _ in sel.select(t):
            i = key.data
            b = key.fileobj.recv(4096)
            got[i] += b
            if not b or got[i].endswith(b"\n"):
                sel.unregister(key.fileobj)
                left -= 1
    for i, s in enumerate(socks):
        expect(got[i], b"connection %d of %d\n" % (i, n), "connection %d" % i)
        s.close()
    print("%d connections answered right" % n)


def cmd_disconnect(port, n, keep, rst):
    c = Conn(port)
    c.s.sendall(b"BIG %d\n" % n)
    expect(c.exactly(keep), pattern(n)[:keep], "the first %d bytes of BIG %d" % (keep, n))
    if rst:
        import struct
        c.s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()


def cmd_long(port, nbytes):
    """A line of nbytes without its newline: ERR line too long, then EOF."""
    s = connect(port)
    try:
        s.sendall(b"x" * nbytes)
    except ConnectionError:
        pass  # the server may close before it has read it all
    got = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            break
        if not b:
            break
        got += b
    s.close()
    expect(got, b"ERR line too long\n", "a line of %d bytes" % nbytes)
    print("a line of %d bytes: ERR line too long" % nbytes)


def cmd_garbage(port, nbytes):
    s = connect(port)
    data = os.urandom(nbytes)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        got = 0
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
        print("sent %d random bytes, %d bytes of replies" % (nbytes, got))
    except (ConnectionError, socket.timeout) as e:
        print("sent %d random bytes: %s" % (nbytes, e))
    s.close()


BUG_VALUE = "value-%03d-abcde"  # 15 bytes: a 16-byte object with its NUL


def bugcheck(port, v):
    # The SETs in one go (their replies read after); then each GET a round
    # trip of its own, so that replicas wrong about different keys are
    # caught one at a time.
    c = Conn(port)
    sets = ["SET k%03d " % i + BUG_VALUE % i for i in range(v)] + ["SET c 999999999999999"]
    c.s.sendall("".join(x + "\n" for x in sets).encode())
    for x in sets:
        expect(c.line(), b"OK\n", x)
    expect(c.ask("INCR c"), b"1000000000000000\n", "INCR c")
    c.close()
    c = Conn(port)
    for i in range(v):
        expect(c.ask("GET k%03d" % i), (BUG_VALUE % i + "\n").encode(), "GET k%03d" % i)
    expect(c.ask("GET c"), b"1000000000000000\n", "GET c")
    c.close()


def cmd_bugcheck(port, v):
    try:
        bugcheck(port, v)
    except Wrong as e:
        print("wrong: %s" % e)
        return 1
    print("right")
    return 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit("lineclient: nothing listens on %d after %d s" % (port, seconds))


def cmd_bugrate(server, lib, n, v):
    wrong = 0
    for seed in range(1, n + 1):
        port = free_port()
        env = dict(os.environ, LD_PRELOAD=lib, DIEHARD_SEED="%x" % seed, DIEHARD_FILL="random")
        p = subprocess.Popen([server, str(port)], env=env, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            try:
                bugcheck(port, v)
            except (Wrong, OSError) as e:
                wrong += 1
                print("seed %x: wrong: %s" % (seed, e), file=sys.stderr)
        finally:
            p.kill()
            p.wait()
    print("%d of %d seeds wrong" % (wrong, n))


def main():
    a = sys.argv[1:]
    if not a:
        raise SystemExit(__doc__)
    cmd = a[0]
    try:
        if cmd == "pattern":
            sys.stdout.buffer.write(pattern(int(a[1])))
        elif cmd == "send":
            cmd_send(int(a[1]), a[2:])
        elif cmd == "halfclose":
            cmd_halfclose(int(a[1]))
        elif cmd == "load":
            cmd_load(int(a[1]), int(a[2]))
        elif cmd == "many":
            cmd_many(int(a[1]), int(a[2]))
        elif cmd == "disconnect":
            cmd_disconnect(int(a[1]), int(a[2]), int(a[3]), len(a) > 4 and a[4] == "rst")
        elif cmd == "long":
            cmd_long(int(a[1]), int(a[2]))
        elif cmd == "garbage":
            cmd_garbage(int(a[1]), int(a[2]))
        elif cmd == "bugcheck":
            return cmd_bugcheck(int(a[1]), int(a[2]))
        elif cmd == "bugrate":
            cmd_bugrate(a[1], a[2], int(a[3]), int(a[4]))
        else:
            raise SystemExit(__doc__)
    except Wrong as e:
        print("lineclient %s: wrong: %s" % (cmd, e), file=sys.stderr)
        return 1
    except OSError as e:
        print("lineclient %s: %s" % (cmd, e), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
