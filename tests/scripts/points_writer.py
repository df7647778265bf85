# A long-running program for tests/points.bats: one command a line on
# stdin, one line of output when it is done (flushed), so that the test
# sees, from diehard's committed output, that a point was passed.
#   sync NAME TEXT     write TEXT into NAME, fsync it
#   append NAME TEXT   append TEXT and a newline to NAME, fsync it
#   log NAME TEXT      append TEXT and a newline to NAME, opened once in
#                      append mode and kept open (a daemon's log), flushed
#   log-odd NAME TEXT  the same, but "odd" in the replica that makes
#                      $POINTS_LOCK first
#   logsync NAME TEXT  append TEXT (no newline) to the log NAME kept open,
#                      and fsync it
#   poke NAME AT TEXT  write TEXT at offset AT of the existing NAME (not
#                      truncated), fsync it
#   mmap NAME TEXT     make NAME as long as TEXT, map it shared, put TEXT in
#                      the mapping and msync it (mmap's flush: MS_SYNC)
#   row N              insert N into t.db's table t (SQLite in WAL mode, one
#                      transaction)
#   jrow N             insert N into j.db's table t (SQLite in its default
#                      journal mode, DELETE: the journal's removal commits)
#   rm NAME            remove NAME ("refused NAME ERROR" when the kernel
#                      says no)
#   mv NAME TO         rename NAME to TO ("refused NAME ERROR" when the
#                      kernel says no)
#   mvx NAME TO        the same with RENAME_NOREPLACE (renameat2)
#   order A B          sync A then B in the replica that makes $POINTS_LOCK
#                      first, B then A in the others
#   odd NAME           write "odd" into NAME if this replica makes the
#                      directory $POINTS_LOCK first, else "even"; fsync
#   nosync-odd NAME    write "even" into NAME; the replica that makes
#                      $POINTS_LOCK first does not fsync it
#   skip-odd NAME      the replica that makes $POINTS_LOCK first never
#                      syncs NAME (it waits for its input to end); the
#                      others write "even" and fsync
import ctypes
import mmap
import os
import sqlite3
import sys


def write(name, text, mode="w"):
    with open(name, mode) as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def first():
    try:
        os.mkdir(os.environ["POINTS_LOCK"])
        return True
    except FileExistsError:
        return False


db = None
jdb = None
logs = {}


def log(name, text, end="\n"):
    if name not in logs:
        logs[name] = open(name, "a")
    logs[name].write(text + end)
    logs[name].flush()


for line in sys.stdin:
    cmd, _, rest = line.rstrip("\n").partition(" ")
    name, _, text = rest.partition(" ")
    if cmd == "sync":
        write(name, text)
        print("synced", name, flush=True)
    elif cmd == "append":
        write(name, text + "\n", "a")
        print("appended", name, flush=True)
    elif cmd == "log":
        log(name, text)
        print("logged", name, text, flush=True)
    elif cmd == "logsync":
        log(name, text, "")
        os.fsync(logs[name].fileno())
        print("logsynced", name, text, flush=True)
    elif cmd == "log-odd":
        log(name, "odd" if first() else text)
        print("logged", name, text, flush=True)
    elif cmd == "poke":
        at, _, what = text.partition(" ")
        fd = os.open(name, os.O_WRONLY)
        os.pwrite(fd, what.encode(), int(at))
        os.fsync(fd)
        os.close(fd)
        print("poked", name, flush=True)
    elif cmd == "mmap":
        data = text.encode()
        with open(name, "w+b") as f:
            f.truncate(len(data))
            with mmap.mmap(f.fileno(), len(data), mmap.MAP_SHARED) as m:
                m[:] = data
                m.flush()
        print("mapped", name, flush=True)
    elif cmd == "row":
        if db is None:
            db = sqlite3.connect("t.db")
            db.execute("pragma journal_mode=wal")
            db.execute("create table if not exists t(n)")
            db.commit()
        db.execute("insert into t values (?)", (int(name),))
        db.commit()
        print("row", name, flush=True)
    elif cmd == "jrow":
        if jdb is None:
            jdb = sqlite3.connect("j.db")
            jdb.execute("create table if not exists t(n)")
            jdb.commit()
        jdb.execute("insert into t values (?)", (int(name),))
        jdb.commit()
        print("jrow", name, flush=True)
    elif cmd == "rm":
        try:
            os.unlink(name)
            print("removed", name, flush=True)
        except OSError as e:
            print("refused", name, type(e).__name__, flush=True)
    elif cmd == "order":
        for n in ((name, text) if first() else (text, name)):
            write(n, n)
        print("ordered", flush=True)
    elif cmd in ("mv", "mvx"):
        try:
            if cmd == "mv":
                os.rename(name, text)
            else:
                libc = ctypes.CDLL(None, use_errno=True)
                at = -100  # AT_FDCWD
                if libc.renameat2(at, name.encode(), at, text.encode(), 1) != 0:
                    e = ctypes.get_errno()
                    raise OSError(e, os.strerror(e))
            print("moved", name, flush=True)
        except OSError as e:
            print("refused", name, type(e).__name__, flush=True)

    elif cmd == "odd":
        write(name, "odd" if first() else "even")
        print("wrote", name, flush=True)
    elif cmd == "nosync-odd":
        if first():
            with open(name, "w") as f:
                f.write("even")
        else:
            write(name, "even")
        print("wrote", name, flush=True)
    elif cmd == "skip-odd":
        if first():
            sys.stdin.read()
            sys.exit(0)
        write(name, "even")
        print("wrote", name, flush=True)
print("end", flush=True)
