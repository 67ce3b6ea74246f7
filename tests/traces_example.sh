#!/usr/bin/env bash
# examples/traces.c (rjq-traces: W3C trace context through jobs) against a
# private redis-server: the producer's traceparent reaches every job's
# on_job_start hook (same trace id, the producer's span as the parent, a
# child span of its own), and on_job_finish ends that same child span, once
# per job; the producer's await of each job gets its headers back with the
# outcome (the producer's trace and span, the tenant). (wait_ms -1: not
# known, rjq.h on_job_start: a job pushed at its enqueue while the worker's
# claim was in flight is started by that claim, which reads no wait.)
#
# ctest sets RJQ_BUILD (build folder) and RJQ_SOURCE (source folder).
set -u
build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
ex="$build/rjq-traces"
[ -x "$ex" ] || { echo "FAIL: $ex not found (configure with RJQ_BUILD_EXAMPLES=ON)" >&2; exit 1; }

# shellcheck source=tests/example_redis.bash
. "$(dirname "${BASH_SOURCE[0]}")/example_redis.bash"
example_redis_start traces-example

n=5
"$ex" $n > "$dir/out" || { echo "FAIL: rjq-traces exited with status $?" >&2; cat "$dir/out" >&2; exit 1; }
cat "$dir/out"
/usr/bin/python3 - "$dir/out" "$n" <<'PY' || exit 1
import re, sys
lines = open(sys.argv[1]).read().splitlines()
n = int(sys.argv[2])
m = re.fullmatch(r'producer trace=([0-9a-f]{32}) span=([0-9a-f]{16})', lines[0])
assert m, lines[0]
trace, parent = m.groups()
starts, finishes, outcomes = {}, {}, {}
for l in lines[1:]:
    s = re.fullmatch(r'start job=(\S+) attempt=1 trace=([0-9a-f]{32}) parent=([0-9a-f]{16}) '
                     r'span=([0-9a-f]{16}) wait_ms=(\d+|-1) tenant=acme', l)
    f = re.fullmatch(r'finish job=(\S+) trace=([0-9a-f]{32}) span=([0-9a-f]{16}) '
                     r'outcome=completed run_ms=(\d+)', l)
    o = re.fullmatch(r'outcome job=(\S+) trace=([0-9a-f]{32}) parent=([0-9a-f]{16}) '
                     r'status=completed tenant=acme', l)
    assert s or f or o, 'unexpected line: ' + l
    if o:
        job, t, p = o.groups()
        assert job not in outcomes, 'outcome twice: ' + l
        assert t == trace and p == parent, 'the outcome\'s headers are not the producer\'s: ' + l
        outcomes[job] = 1
    elif s:
        job, t, p, span, _ = s.groups()
        assert job not in starts, 'started twice: ' + l
        assert t == trace and p == parent, 'not the producer\'s trace: ' + l
        assert span != parent and span != '0' * 16, l
        starts[job] = span
    else:
        job, t, span, _ = f.groups()
        assert job in starts and job not in finishes, 'finish without its start, or twice: ' + l
        assert t == trace and span == starts[job], 'not the span its start made: ' + l
        finishes[job] = span
assert len(starts) == n and len(finishes) == n, (len(starts), len(finishes))
assert set(outcomes) == set(starts), ('an outcome per job', sorted(outcomes), sorted(starts))
assert len(set(starts.values())) == n, 'child spans not unique'
print('PASS: %d jobs, each a child span of the producer\'s' % n)
PY
