#!/usr/bin/env bash
# `make test` runs both passes (the first, then ASan+UBSan) even when the
# first fails, recaps the failed tests of each, says how each pass went and
# exits non-zero when either failed: one flaky test must not hide the
# sanitizer's results. Checked with a stand-in ctest on PATH, on two empty
# build folders (make -o skips the builds).
#
# Env: RJQ_SOURCE (the source tree, holding the Makefile).
set -u
SRC=${RJQ_SOURCE:?RJQ_SOURCE must name the source tree}
FAILURES=0
fail() {
    FAILURES=$((FAILURES + 1))
    echo "FAIL: $*"
    echo "--- make's output:"
    cat "$T/out"
}

T=$(mktemp -d "${TMPDIR:-/tmp}/rjq-make-test.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin"
cat >"$T/bin/ctest" <<'EOF'
#!/usr/bin/env bash
# the stand-in: records each run; fails in the folder named by FAKE_FAIL_IN
echo "$(basename "$PWD") asan=${RJQ_UNDER_ASAN:-0} $*" >>"$FAKE_LOG"
if [ "$(basename "$PWD")" = "$FAKE_FAIL_IN" ]; then
    mkdir -p Testing/Temporary
    echo "7:test_fake.flaky_in_$FAKE_FAIL_IN" >Testing/Temporary/LastTestsFailed.log
    {
        echo "7/9 Testing: test_fake.flaky_in_$FAKE_FAIL_IN"
        echo "the output of the test that failed in $FAKE_FAIL_IN"
        echo "\"test_fake.flaky_in_$FAKE_FAIL_IN\" time elapsed: 00:00:01"
    } >Testing/Temporary/LastTest.log
    exit 8
fi
exit 0
EOF
chmod +x "$T/bin/ctest"

# run FAIL_IN [MAKE_ARGS...]: make test with the stand-in; sets RC, output in $T/out
run() {
    local fail_in=$1
    shift
    rm -rf "$T/first" "$T/asan" "$T/fuzz" "$T/log"
    mkdir -p "$T/first" "$T/asan" "$T/fuzz"
    env -u RJQ_UNDER_ASAN -u JOBS -u TEST_JOBS -u MAKEFLAGS -u MFLAGS -u MAKELEVEL PATH="$T/bin:$PATH" FAKE_LOG="$T/log" FAKE_FAIL_IN="$fail_in" \
        make --no-print-directory -C "$SRC" -o build -o build-asan -o build-fuzz test \
        BUILD="$T/first" ASAN_BUILD="$T/asan" FUZZ_BUILD="$T/fuzz" "$@" >"$T/out" 2>&1
    RC=$?
}

# each pass ran ctest with -jN
jobs_are() {
    local n
    n=$(grep -c -- " -j$2\( \|$\)" "$T/log")
    [ "$n" = 3 ] || fail "$1: $n of the 3 ctest runs had -j$2: $(cat "$T/log")"
}

both_ran() {
    grep -q '^first asan=0 ' "$T/log" || fail "$1: the first pass did not run"
    grep -q '^asan asan=1 .*-LE valgrind' "$T/log" || fail "$1: the ASan pass did not run"
    grep -q '^fuzz asan=0 .*-L fuzz' "$T/log" || fail "$1: the fuzz smoke run did not run"
}

run first
[ "$RC" != 0 ] || fail "first pass failed: make test exited 0"
both_ran "first pass failed"
grep -q "failed tests of the first pass" "$T/out" || fail "no recap of the first pass"
grep -q "the output of the test that failed in first" "$T/out" || fail "the failed test's output is not recapped"
grep -q "make test: first pass FAILED, ASan+UBSan pass passed" "$T/out" || fail "no summary of both passes"

run asan
[ "$RC" != 0 ] || fail "ASan pass failed: make test exited 0"
both_ran "ASan pass failed"
grep -q "the output of the test that failed in asan" "$T/out" || fail "the ASan pass's failed test is not recapped"
grep -q "make test: first pass passed, ASan+UBSan pass FAILED" "$T/out" || fail "no summary of both passes"

run none
[ "$RC" = 0 ] || fail "both passed: make test exited $RC"
both_ran "both passed"
grep -q "failed tests" "$T/out" && fail "a recap although nothing failed"
grep -q "make test: first pass passed, ASan+UBSan pass passed" "$T/out" || fail "no summary of both passes"
jobs_are "by default" "$((2 * $(nproc)))" # (two tests per core)

# ctest -j follows TEST_JOBS, by default twice JOBS
run none JOBS=5
[ "$RC" = 0 ] || fail "JOBS=5: make test exited $RC"
jobs_are "JOBS=5" 10
run none JOBS=5 TEST_JOBS=3
[ "$RC" = 0 ] || fail "TEST_JOBS=3: make test exited $RC"
jobs_are "TEST_JOBS=3" 3

[ "$FAILURES" = 0 ] || exit 1
echo "make test runs and reports its three passes"
