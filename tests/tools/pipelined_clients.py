#!/usr/bin/env python3
"""pipelined_clients.py: many redis clients at once, each pipelining its
requests, every reply byte checked (tests/tcp.bats, issue 42).

    pipelined_clients.py PORT [-c CONNECTIONS] [-r REQUESTS] [--timeout SECONDS]

Opens CONNECTIONS (1000) connections to the redis server on 127.0.0.1:PORT,
all of them before any sends a byte, and keeps every one open until all are
done. Then each sends REQUESTS (20) requests pipelined, in up to three writes
cut at places of their own (mid-request too), while it reads the replies:

    SET ctr:C 0                  first: the counter of connection C
    SET key:C:I VALUE            VALUE of 1 byte to 20 KiB, binary (CR and LF
                                 included); a quarter of them over 4 KiB, so
                                 that requests and replies span the proxy's
                                 4 KiB chunks
    GET key:C:J                  a key this connection set before (J < I)
    INCR ctr:C

Everything is a function of C and I (no randomness): the exact RESP byte
stream each connection must get is known in advance, and all of it is
compared, byte for byte, up to its end; a byte more is wrong too. The keys
are the connection's own and set before they are read (the counter too), so
a server that is not fresh gives the same replies.

Prints one summary line on stdout. On a wrong reply, the first one (lowest
connection, then offset) with an excerpt of what was expected and what came,
and how many connections were wrong, on stderr.

Exit status 0 when every connection got exactly its bytes, 1 when a reply
was wrong (or ended early, or went on too long), 2 on a connection error or
when the whole did not end within --timeout seconds (120).
"""
import argparse
import asyncio
import resource
import sys
import time

BASE = bytes(range(256)) * 2


def mix(c, i, salt=0):
    """A well-spread 32-bit number from (c, i): splitmix64's finalizer."""
    z = (c * 0x9E3779B97F4A7C15 + i * 0xBF58476D1CE4E5B9 + salt * 0x94D049BB133111EB + 1) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return (z ^ (z >> 31)) & 0xFFFFFFFF


def value_size(c, i):
    h = mix(c, i, 1)
    kind = h % 8
    h >>= 3
    if kind < 4:
        return 1 + h % 64  # small
    if kind < 6:
        return 65 + h % (4096 - 65)  # up to a chunk
    return 4096 + h % (20480 - 4096 + 1)  # past one, up to 20 KiB


def value(c, i):
    """value_size(c, i) bytes, every byte value possible (CR, LF, NUL)."""
    n = value_size(c, i)
    start = mix(c, i, 2) % 256
    rot = BASE[start:start + 256]
    return (rot * (n // 256 + 1))[:n]


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def plan(c, nreq):
    """The requests of connection c and the exact replies they get."""
    ctr = b"ctr:%d" % c
    reqs = [resp(b"SET", ctr, b"0")]
    reps = [b"+OK\r\n"]
    stored = []  # (key, value) set so far
    count = 0
    for i in range(1, nreq):
        h = mix(c, i, 3) % 10
        if not stored or h < 5:
            key, val = b"key:%d:%d" % (c, i), value(c, i)
            stored.append((key, val))
            reqs.append(resp(b"SET", key, val))
            reps.append(b"+OK\r\n")
        elif h < 8:
            key, val = stored[mix(c, i, 4) % len(stored)]
            reqs.append(resp(b"GET", key))
            reps.append(b"$%d\r\n%s\r\n" % (len(val), val))
        else:
            count += 1
            reqs.append(resp(b"INCR", ctr))
            reps.append(b":%d\r\n" % count)
    return b"".join(reqs), b"".join(reps)


def cuts(c, n):
    """Where connection c's n request bytes are cut into up to 3 writes."""
    points = sorted({mix(c, 0, 5) % n, mix(c, 0, 6) % n} - {0})
    return [0] + points + [n]


class Conn:
    def __init__(self, c, nreq):
        self.c = c
        self.request, self.expected = plan(c, nreq)
        self.got = bytearray()
        self.error = None  # a connection error, or how the replies ended early
        self.reader = self.writer = None

    def first_wrong(self):
        """The offset of the first byte received that differs from the
        expected one (a byte past the end included), or None."""
        got, exp = self.got, self.expected
        n = min(len(got), len(exp))
        if got[:n] != exp[:n]:
            lo, hi = 0, n  # by halves: got[:lo] is right, got[:hi] is not
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if got[:mid] != exp[:mid]:
                    hi = mid
                else:
                    lo = mid
            return lo
        return n if len(got) > len(exp) else None

    async def connect(self, port):
        try:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as e:
            self.error = "connect: %s" % e

    async def send(self):
        pts = cuts(self.c, len(self.request))
        for a, b in zip(pts, pts[1:]):
            self.writer.write(self.request[a:b])
            await self.writer.drain()
            await asyncio.sleep(0)

    async def receive(self):
        want = len(self.expected)
        while len(self.got) < want:
            data = await self.reader.read(65536)
            if not data:
                self.error = ENDED
                return
            at = len(self.got)
            self.got += data
            if data != self.expected[at:at + len(data)]:
                return  # a wrong byte (or one too many): no need to go on

    async def exchange(self):
        sender = asyncio.ensure_future(self.send())
        try:
            await self.receive()
        except OSError as e:
            self.error = "receive: %s" % e
        try:
            await sender
        except OSError as e:
            self.error = self.error or "send: %s" % e


ENDED = "the server's side ended early"
CONNECTED = None  # when the last connection was made (time.monotonic())


async def run(conns, port):
    global CONNECTED
    # Every connection first, then the requests.
    await asyncio.gather(*(k.connect(port) for k in conns))
    if any(k.error for k in conns):
        return
    CONNECTED = time.monotonic()
    await asyncio.gather(*(k.exchange() for k in conns))


def excerpt(b, at, before=24, after=40):
    lo = max(0, at - before)
    return "[%d:%d] %r" % (lo, min(len(b), at + after), bytes(b[lo:at + after]))


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def say(*lines):
    for line in lines:
        print(line if line.startswith(" ") else "pipelined_clients: " + line, file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("port", type=int)
    ap.add_argument("-c", "--connections", type=int, default=1000)
    ap.add_argument("-r", "--requests", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=120.0, help="for the whole run (seconds)")
    args = ap.parse_args()
    limit = raise_nofile()
    if limit != resource.RLIM_INFINITY and limit < args.connections + 32:
        say("the fd limit is %d, too low for %d connections" % (limit, args.connections))
        return 2

    conns = [Conn(c, max(1, args.requests)) for c in range(args.connections)]
    loop = asyncio.new_event_loop()
    t0 = time.monotonic()
    in_time = True
    try:
        loop.run_until_complete(asyncio.wait_for(run(conns, args.port), args.timeout))
    except asyncio.TimeoutError:
        in_time = False
    t2 = time.monotonic()
    made = sum(1 for k in conns if k.writer is not None)
    for k in conns:
        if k.writer is not None:
            k.writer.close()
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()

    if CONNECTED is None:
        failed = [k for k in conns if k.error]
        say(*("connection %d: %s" % (k.c, k.error) for k in failed[:5]))
        say("%d of %d connections made%s" % (made, len(conns), "" if in_time else " within %g s" % args.timeout))
        return 2

    wrong = []  # (connection, offset of its first wrong byte or None)
    for k in conns:
        at = k.first_wrong()
        if at is None and len(k.got) < len(k.expected):
            k.error = k.error or "no more within %g s" % args.timeout
        if at is not None or k.error:
            wrong.append((k, at))
    if wrong:
        bad = [(k, at) for k, at in wrong if at is not None]
        k, at = (bad or wrong)[0]
        if at is not None:
            say("connection %d: first wrong byte at offset %d (%d bytes expected, %d received)"
                % (k.c, at, len(k.expected), len(k.got)),
                "  expected %s" % excerpt(k.expected, at),
                "  got      %s" % excerpt(k.got, at))
        for k, _ in [w for w in wrong if w[1] is None][:3]:
            say("connection %d: %d of %d bytes, all right; %s" % (k.c, len(k.got), len(k.expected), k.error))
        say("%d of %d connections did not get exactly their bytes (%d with a wrong byte)"
            % (len(wrong), len(conns), len(bad)))
        return 1 if bad or any(k.error == ENDED for k, _ in wrong) else 2
    print("pipelined_clients: %d connections open at once, %d pipelined requests (%d bytes sent), "
          "%d reply bytes all exact; connected in %.1f s, replies in %.1f s"
          % (len(conns), len(conns) * max(1, args.requests),
             sum(len(k.request) for k in conns), sum(len(k.got) for k in conns), CONNECTED - t0, t2 - CONNECTED))
    return 0


if __name__ == "__main__":
    sys.exit(main())
