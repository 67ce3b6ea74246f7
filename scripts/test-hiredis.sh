#!/usr/bin/env bash
# The test suite against hiredis 1.x: Debian 12 ships hiredis 0.14.1 only,
# so each 1.x release tree (unmodified upstream sources, kept outside the
# project) is built with SSL into a scratch prefix inside its own build
# folder, rjq is built against it (TLS on), and the suite runs there.
#
#   scripts/test-hiredis.sh [VERSION...]     default: 1.2.0 1.4.1
#
# The last version's suite runs under ASan+UBSan (RJQ_HIREDIS_SANITIZE=0:
# not). The trees are looked up in $RJQ_HIREDIS_SOURCES, else shared/third_party
# beside the repository (or its parent), else /work/shared/third_party (the
# development machines' layout). Build folders: build-hiredis-<version>/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
versions=("$@")
((${#versions[@]})) || versions=(1.2.0 1.4.1)
jobs=$(nproc 2>/dev/null || echo 2)

sources=${RJQ_HIREDIS_SOURCES:-}
if [ -z "$sources" ]; then
    for d in "$root/../shared/third_party" "$root/../../shared/third_party" /work/shared/third_party; do
        if [ -d "$d/hiredis-${versions[0]}" ]; then sources=$(cd "$d" && pwd); break; fi
    done
fi
if [ -z "$sources" ] || [ ! -d "$sources/hiredis-${versions[0]}" ]; then
    echo "test-hiredis: no hiredis source trees found (set RJQ_HIREDIS_SOURCES to the folder" >&2
    echo "holding hiredis-<version>/); the hiredis 1.x runs are skipped" >&2
    exit 0
fi

# settings VERSION: sets tree, out, prefix, kind, env and labels for it.
settings() {
    v=$1
    tree="$sources/hiredis-$v"
    out="$root/build-hiredis-$v"
    prefix="$out/hiredis-prefix"
    # The newest release runs under ASan+UBSan (TLS and OpenSSL's paths
    # sanitized too); the others as the normal -Werror build.
    # Only the tests whose outcome can depend on the hiredis version run
    # here; `make test` runs the others (labels: tests/CMakeLists.txt):
    #   deb      the Debian packages build on the system's hiredis
    #   logic    pure-logic unit tests: no server, no hiredis
    #   source   checks of the source tree and the Makefile
    #   tool     the tools' own tests (rjq, serve, top, the PostgreSQL
    #            bridge), while tools/ includes no hiredis header and calls
    #            no library internal (rjq__*): they reach Redis only through
    #            the public API, whose own tests all run here
    #            (the TLS tool test, label tls, runs: TLS is built only here)
    #   browser  the dashboard in chromium
    # (the tool tests were ~250 s of each run's ~550 s of test time)
    local skip='deb|logic|source|browser|tool'
    if grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]hiredis|rjq__' "$root/tools" >/dev/null 2>&1; then
        echo "test-hiredis: tools/ uses hiredis or the library's internals: their tests run here too"
        skip='deb|logic|source|browser'
    fi
    kind=(-DCMAKE_BUILD_TYPE=RelWithDebInfo) env=() labels=(-LE "$skip")
    if [ "$v" = "${versions[$((${#versions[@]} - 1))]}" ] && [ "${RJQ_HIREDIS_SANITIZE:-1}" = 1 ]; then
        kind=(-DCMAKE_BUILD_TYPE=Debug -DRJQ_SANITIZE=ON) env=(RJQ_UNDER_ASAN=1) labels=(-LE "valgrind|$skip")
    fi
}

# build VERSION: hiredis VERSION (SSL on) into its prefix, rjq against it.
build() {
    settings "$1"
    [ -d "$tree" ] || { echo "test-hiredis: $tree is missing" >&2; exit 1; }
    echo "== hiredis $v: building it (SSL on) into $prefix"
    if [ ! -f "$prefix/.built" ]; then
        cmake -S "$tree" -B "$out/hiredis-build" -DENABLE_SSL=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib > "$out.hiredis.log" 2>&1 &&
            cmake --build "$out/hiredis-build" -j"$jobs" --target install >> "$out.hiredis.log" 2>&1 ||
            { cat "$out.hiredis.log" >&2; exit 1; }
        touch "$prefix/.built"
    fi
    echo "== hiredis $v: building rjq against it (${kind[*]})"
    cmake -S . -B "$out/rjq" "${kind[@]}" -DRJQ_WERROR=ON -DRJQ_ASSERTS=ON \
        -DCMAKE_PREFIX_PATH="$prefix" | grep -E '^-- rjq:' || true
    grep -q '^RJQ_TLS:INTERNAL=ON' "$out/rjq/CMakeCache.txt" ||
        { echo "test-hiredis: hiredis $v with SSL gave no TLS build" >&2; exit 1; }
    cmake --build "$out/rjq" -j"$jobs"
}

# The trees are built side by side (each build's configure steps, single
# threaded, and link steps overlap the other's compiles), each into its
# log, shown when it fails; then the suites run one after the other.
pids=()
for v in "${versions[@]}"; do
    mkdir -p "$root/build-hiredis-$v"
    (build "$v") > "$root/build-hiredis-$v.build.log" 2>&1 &
    pids+=("$!")
done
failed=0
for i in "${!versions[@]}"; do
    v=${versions[$i]}
    if wait "${pids[$i]}"; then
        grep -E '^(== |-- rjq:)' "$root/build-hiredis-$v.build.log"
    else
        cat "$root/build-hiredis-$v.build.log" >&2
        echo "test-hiredis: the build against hiredis $v failed" >&2
        failed=1
    fi
done
[ "$failed" = 0 ] || exit 1

# ctest runs TEST_JOBS tests at once (the Makefile's: two per core)
test_jobs=${TEST_JOBS:-$((2 * jobs))}
for v in "${versions[@]}"; do
    settings "$v"
    echo "== hiredis $v: the test suite"
    (cd "$out/rjq" && env "${env[@]}" ctest --output-on-failure -j"$test_jobs" "${labels[@]}") ||
        { bash "$root/tests/failure_recap.sh" "$out/rjq"; exit 1; }
done
