"""A line server that keeps its state in an SQLite database (real SQLite,
python's sqlite3 module), for the tests of --durable (tests/daemons.bats).

    sqlite_server.py PORT DB

One connection at a time; one command a line, one reply a line:
    SET key value   OK           (a transaction of its own, committed)
    INCR key        the new value (a missing key counts as 0)
    GET key         the value, or NIL
    COUNT           the number of keys
Everything the server knows is in DB: a new process on the same file
answers as the old one did.
"""
import socketserver
import sqlite3
import sys

db = sqlite3.connect(sys.argv[2], isolation_level=None)
db.execute("PRAGMA journal_mode=DELETE")
db.execute("PRAGMA synchronous=FULL")
db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")


def run(line):
    words = line.split(" ", 2)
    if words[0] == "SET" and len(words) == 3:
        with db:
            db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (words[1], words[2]))
        return "OK"
    if words[0] == "INCR" and len(words) == 2:
        db.execute("BEGIN IMMEDIATE")
        row = db.execute("SELECT v FROM kv WHERE k = ?", (words[1],)).fetchone()
        n = int(row[0]) + 1 if row else 1
        db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?)", (words[1], str(n)))
        db.execute("COMMIT")
        return str(n)
    if words[0] == "GET" and len(words) == 2:
        row = db.execute("SELECT v FROM kv WHERE k = ?", (words[1],)).fetchone()
        return row[0] if row else "NIL"
    if words[0] == "COUNT":
        return str(db.execute("SELECT count(*) FROM kv").fetchone()[0])
    return "ERR"


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        for raw in self.rfile:
            self.wfile.write((run(raw.decode().rstrip("\r\n")) + "\n").encode())


class Server(socketserver.TCPServer):
    allow_reuse_address = True


Server(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
