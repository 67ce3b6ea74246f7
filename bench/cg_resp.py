# A RESP client for the callgrind bench scripts' drivers (callgrind_drain_floor.sh,
# callgrind_group_floor.sh, callgrind_await_floor.sh, callgrind_deps_floor.sh,
# deps_replay.sh): one place for encoding a command and reading a reply. The
# scripts put bench/ on PYTHONPATH (cg_redis.sh); their drivers
# `from cg_resp import ...`.
import socket


def enc(*a):
    """A command's RESP bytes (its words as bytes, or anything str() turns into them)."""
    b = [b'*%d\r\n' % len(a)]
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        b.append(b'$%d\r\n%s\r\n' % (len(x), x))
    return b''.join(b)


class Conn:
    """One connection to 127.0.0.1:port; call() sends a command and reads its reply."""

    def __init__(self, port):
        self.s = socket.create_connection(('127.0.0.1', port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile('rb')

    def send(self, *a):
        self.s.sendall(enc(*a))

    def read(self):
        l = self.f.readline()
        t, r = l[:1], l[1:-2]
        if t == b'*':
            k = int(r)
            return None if k < 0 else [self.read() for _ in range(k)]
        if t == b'$':
            k = int(r)
            if k < 0:
                return None
            return self.f.read(k + 2)[:-2]
        if t == b':':
            return int(r)
        if t == b'-':
            raise SystemExit('redis: ' + r.decode())
        return r

    def call(self, *a):
        self.send(*a)
        return self.read()
