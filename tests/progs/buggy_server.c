/*
 * buggy_server: line_server (tests/progs/line_server.c, same protocol and
 * options) with a planted heap bug, for diehard's replicas to mask over TCP
 * (tests/tcp.bats).
 *
 * THE BUG (format_int in line_server.c): INCR allocates its new value one
 * byte short, with no room for the terminating NUL. Harmless for most
 * numbers; but a 16-digit one (INCR of 999999999999999) fills a 16-byte
 * request exactly, and the NUL lands on the first byte of whatever follows.
 *
 * Under glibc that is the chunk's own slack (malloc(16) has 24 usable
 * bytes): the bug never shows. On DieHard's heap every 16-byte object sits in
 * a random slot of the 16-byte size class, kept at most half full; the slot
 * after the new value is free space (harmless), or one of our keys or values
 * (all 16-byte objects when at most 15 bytes long), which the NUL empties:
 * a later GET of that key answers an empty line, or NIL. Which object is hit
 * differs from seed to seed, so two replicas are rarely wrong, and almost
 * never in the same way.
 *
 * Measured with the allocator alone (2026-11-23; `tests/tools/lineclient.py
 * bugrate build/tests/buggy_server build/libdiehard.so 300 V`: DIEHARD_SEED
 * 1..300, DIEHARD_FILL=random as in a replica; V keys set to 15-byte values
 * and 999999999999999 under c, one INCR c, then every key read back), the
 * answer was wrong for
 *
 *   V = 10: 23 of 300 seeds (8 %)     V = 30: 52 of 300 (17 %)
 *   V = 20: 42 of 300 (14 %)          V = 50: 125 of 300 (42 %; 69 keys hit, 56 values)
 *
 * and right for every run under glibc. tests/tcp.bats uses V = 30: each
 * replica of a `diehard -k 3` run is wrong with p = 0.17, so one of three
 * is wrong in about 35 % of runs and two in about 7 %, almost always about
 * different keys (caught one at a time, as the GETs are one round trip
 * each); two wrong the same way (the same object hit: about 1 in 60 of
 * those) would win the vote.
 */
#define PLANTED_BUG
#define SERVER_NAME "buggy_server"
#include "line_server.c"
