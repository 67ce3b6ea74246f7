#!/usr/bin/env bash
# The rjq tool over TLS (redis-cli's flag names) against a private TLS-only
# redis-server (port 0) with certificates from tests/certs/make_certs.sh,
# and by host name. In a build without TLS: rediss:// and --tls fail with a
# message that says how to get TLS, and never show the password.
#
# Env: RJQ_BUILD (build dir holding the rjq binary), RJQ_SOURCE.
set -u
BUILD=${RJQ_BUILD:?RJQ_BUILD must name the build directory}
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source directory}
RJQ_BIN="$BUILD/rjq"
FAILURES=0
die() { echo "FATAL: $*" >&2; exit 1; }
[ -x "$RJQ_BIN" ] || die "$RJQ_BIN is not built"

# shellcheck source=scripts/redis-private.sh
. "$SRC/scripts/redis-private.sh"
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rjq-tls-test.XXXXXX") || die "mktemp failed"
PID=
cleanup() {
    if [ -n "$PID" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; fi
    rm -rf "$DIR"
}
trap cleanup EXIT

run() {
    LAST="rjq $*"
    "$RJQ_BIN" -t 5 "$@" >"$DIR/out" 2>"$DIR/err" </dev/null
    RC=$?
}
fail() {
    FAILURES=$((FAILURES + 1))
    echo "FAIL: $LAST: $*"
    echo "  exit: $RC"
    echo "  stdout: $(head -c 600 "$DIR/out")"
    echo "  stderr: $(head -c 600 "$DIR/err")"
}
expect() { # rc, then a text stdout or stderr must hold ("" for none)
    [ "$RC" = "$1" ] || fail "expected exit $1"
    if [ -n "$2" ] && ! grep -qF -- "$2" "$DIR/out" "$DIR/err"; then fail "expected '$2'"; fi
    if grep -qF "s3cret" "$DIR/out" "$DIR/err"; then fail "the password is shown"; fi
}

# passwords stay out of messages, a lone one and one holding '@' too
# (nobody listens on port 1)
run -u "redis://s3cret@127.0.0.1:1" -t 1 stats q
expect 1 "redis://***@127.0.0.1:1"
run -u "redis://u:s3cret@x@127.0.0.1:1" -t 1 stats q
expect 1 "redis://u:***@127.0.0.1:1"

mkdir -p "$DIR/certs" && bash "$SRC/tests/certs/make_certs.sh" "$DIR/certs" || die "certificates"
C=$DIR/certs
start_tls() { # client certificates: yes/no; another port when one is taken meanwhile
    for _ in 1 2 3 4 5; do
        PORT=$(redis_free_port) || die "no free port"
        redis-server --port 0 --tls-port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
            --dir "$DIR" --tls-cert-file "$C/server.crt" --tls-key-file "$C/server.key" \
            --tls-ca-cert-file "$C/ca.crt" --tls-auth-clients "$1" --requirepass s3cret \
            --logfile "$DIR/redis.log" &
        PID=$!
        for _ in $(seq 200); do
            kill -0 "$PID" 2>/dev/null || break
            (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
            sleep 0.05
        done
        kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; PID=
    done
    return 1
}
stop_tls() { kill "$PID"; wait "$PID" 2>/dev/null; PID=; }

# a plain connection to a TLS-only port fails at once with a hint, not at -t
# (Redis resets it; another TLS server sends an alert, which is no RESP).
# -t 120: a wait for the deadline would say "timed out" instead.
if start_tls no; then
    "$RJQ_BIN" -t 120 -u "redis://:s3cret@127.0.0.1:$PORT" stats q >"$DIR/out" 2>"$DIR/err" </dev/null
    RC=$? LAST="rjq -u redis://... stats q (a TLS-only port)"
    expect 1 "the server may require TLS: use rediss://"
    grep -q "timed out" "$DIR/err" && fail "waited for the deadline"
    stop_tls
else
    echo "note: this redis-server has no TLS: the TLS-only port is not tried"
fi
ALERT_PY=/usr/bin/python3
if [ -x "$ALERT_PY" ]; then
    "$ALERT_PY" -c '
import os, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    c.recv(4096)
    c.sendall(b"\x15\x03\x03\x00\x02\x02\x46")  # a TLS alert (protocol_version)
    c.close()
' "$DIR/alert.port" &
    PID=$!
    for _ in $(seq 200); do [ -s "$DIR/alert.port" ] || ! kill -0 "$PID" 2>/dev/null && break; sleep 0.05; done
    "$RJQ_BIN" -t 120 -u "redis://127.0.0.1:$(cat "$DIR/alert.port")" stats q >"$DIR/out" 2>"$DIR/err" </dev/null
    RC=$? LAST="rjq -u redis://127.0.0.1:PORT stats q (a server answering with a TLS alert)"
    expect 1 "the server may require TLS: use rediss://"
    grep -q "timed out" "$DIR/err" && fail "waited for the deadline"
    kill "$PID"; wait "$PID" 2>/dev/null; PID=
fi

if ! grep -q '^RJQ_TLS:INTERNAL=ON' "$BUILD/CMakeCache.txt"; then
    run -u "rediss://:s3cret@127.0.0.1:6380" stats q
    expect 1 "built without TLS"
    run --tls --cacert /nonexistent -u "redis://127.0.0.1:6380" stats q
    expect 1 "hiredis_ssl"
    [ "$FAILURES" = 0 ] && echo "PASS: no TLS in this build, said clearly"
    exit $((FAILURES > 0))
fi

start_tls no || die "the TLS redis-server did not start: $(tail -5 "$DIR/redis.log")"
URL="rediss://:s3cret@127.0.0.1:$PORT"
run -u "$URL" --cacert "$C/ca.crt" enqueue q hello
expect 0 ""
[ -n "$(cat "$DIR/out")" ] || fail "no job id printed"
run -u "$URL" --cacert "$C/ca.crt" stats q
expect 0 "ready 1"
# by name (the glue's resolver: localhost from /etc/hosts), redis:// + --tls, --cacertdir
mkdir -p "$DIR/cadir" && cp "$C/ca.crt" "$DIR/cadir/" && openssl rehash "$DIR/cadir" 2>/dev/null ||
    c_rehash "$DIR/cadir" >/dev/null 2>&1
run -u "redis://:s3cret@localhost:$PORT" --tls --cacert-dir "$DIR/cadir" stats q
expect 0 "ready 1"
run -u "$URL" --cacert "$C/ca.crt" --sni redis.test stats q
expect 0 "ready 1"
# the failures a user meets first
run -u "$URL" --cacert "$C/otherca.crt" stats q
expect 1 "the server's certificate was refused: self-signed certificate in certificate chain"
run -u "$URL" --cacert "$C/ca.crt" --sni other.example stats q
expect 1 "hostname mismatch, checked for other.example"
run -u "$URL" --cacert "$C/otherca.crt" --insecure stats q
expect 0 "ready 1"
run -u "$URL" --cacert /nonexistent/ca.pem stats q
expect 1 "/nonexistent/ca.pem"
run -u "$URL" --cacert "$C/ca.crt" --cert "$C/client.crt" stats q
expect 1 "needs its key"
run -u "$URL" --cacert
expect 2 "needs a value"
stop_tls

# mutual TLS
start_tls yes || die "the TLS redis-server did not start: $(tail -5 "$DIR/redis.log")"
URL="rediss://:s3cret@127.0.0.1:$PORT"
run -u "$URL" --cacert "$C/ca.crt" stats q
expect 1 "does the server want a client certificate?"
run -u "$URL" --cacert "$C/ca.crt" --cert "$C/client.crt" --key "$C/client.key" enqueue q two
expect 0 ""
run -u "$URL" --cacert "$C/ca.crt" --cert "$C/client.crt" --key "$C/client.key" stats q
expect 0 "ready 1"
stop_tls

[ "$FAILURES" = 0 ] && echo "PASS: rjq over TLS and mutual TLS, by address and by name"
exit $((FAILURES > 0))
