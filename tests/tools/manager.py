#!/usr/bin/env python3
"""manager.py: the service manager's side of sd_notify, for the tests.

    manager.py LOG [--watchdog USEC] [--listen HOST:PORT] -- COMMAND [ARG]...

Binds a datagram socket (SO_PASSCRED) in a temporary directory, starts
COMMAND with NOTIFY_SOCKET naming it (and WATCHDOG_USEC, or LISTEN_FDS with
a listening TCP socket at fd 3 and LISTEN_PID set in the child), and writes
one line per message it receives to LOG, flushed at once:

    TIME_MS PID MAINPID|OTHER MESSAGE

(TIME_MS since the start; MESSAGE with newlines as '|'). Messages from a
pid other than COMMAND's are marked OTHER: systemd 252 drops them unless
NotifyAccess=all. fds a message carries are closed. When COMMAND exits the
manager exits with its status (128 + signal when killed); SIGTERM sent to
the manager is forwarded to COMMAND.
"""
import os
import signal
import socket
import sys
import tempfile
import time
import array


def main():
    args = sys.argv[1:]
    if len(args) < 3 or '--' not in args:
        sys.exit(__doc__)
    log_path = args[0]
    sep = args.index('--')
    opts, command = args[1:sep], args[sep + 1:]
    watchdog = None
    listen = None
    while opts:
        o = opts.pop(0)
        if o == '--watchdog':
            watchdog = opts.pop(0)
        elif o == '--listen':
            listen = opts.pop(0)
        else:
            sys.exit('manager.py: unknown option ' + o)
    d = tempfile.mkdtemp(prefix='manager.')
    path = os.path.join(d, 'notify')
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    s.bind(path)
    env = dict(os.environ, NOTIFY_SOCKET=path)
    if watchdog:
        env['WATCHDOG_USEC'] = watchdog
    lsock = None
    if listen:
        host, port = listen.rsplit(':', 1)
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((host, int(port)))
        lsock.listen(64)
        env['LISTEN_FDS'] = '1'
        env['LISTEN_FDNAMES'] = 'web'
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        if lsock is not None:
            os.dup2(lsock.fileno(), 3)
            os.set_inheritable(3, True)
            env['LISTEN_PID'] = str(os.getpid())
        os.execvpe(command[0], command, env)
    if lsock is not None:
        lsock.close()
    signal.signal(signal.SIGTERM, lambda sig, frame: os.kill(pid, signal.SIGTERM))
    log = open(log_path, 'a', buffering=1)
    s.settimeout(0.05)
    while True:
        try:
            fds = array.array('i')
            msg, anc, flags, addr = s.recvmsg(65536, socket.CMSG_SPACE(12) + socket.CMSG_SPACE(64 * 4))
            sender = 0
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    sender = int.from_bytes(data[0:4], sys.byteorder)
                elif level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[:len(data) - (len(data) % fds.itemsize)])
            for fd in fds:
                os.close(fd)
            text = msg.decode('utf-8', 'replace').rstrip('\n').replace('\n', '|')
            who = 'MAINPID' if sender == pid else 'OTHER'
            log.write('%d %d %s %s\n' % ((time.monotonic() - t0) * 1000, sender, who, text))
        except socket.timeout:
            pass
        except InterruptedError:
            pass
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            break
    # What was sent just before the exit.
    s.setblocking(False)
    try:
        while True:
            msg = s.recv(65536)
            log.write('%d 0 LATE %s\n' % ((time.monotonic() - t0) * 1000,
                                          msg.decode('utf-8', 'replace').rstrip('\n').replace('\n', '|')))
    except BlockingIOError:
        pass
    os.unlink(path)
    os.rmdir(d)
    if os.WIFSIGNALED(status):
        sys.exit(128 + os.WTERMSIG(status))
    sys.exit(os.WEXITSTATUS(status))


main()
