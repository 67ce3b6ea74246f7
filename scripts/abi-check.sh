#!/usr/bin/env bash
# The ABI check (README "ABI"): the built librjq.so against the stored
# baseline of the last release, abi/librjq.abi (an abixml made by abidw
# from that release's library; scripts/abi-check.sh --refresh rewrites it
# from a build, which is done at a release).
#
#   scripts/abi-check.sh LIB SRCDIR            check (ctest test abi_check)
#   scripts/abi-check.sh --refresh LIB SRCDIR  store LIB's ABI as the baseline
#
# Fails (exit 1) on an incompatible change while the SONAME is still the
# baseline's: bump RJQ_SOVERSION in CMakeLists.txt (and the Debian package
# name, debian/), or undo the change. Incompatible: what abidiff itself
# calls so (a function or variable removed, ...), and any change to a type
# other than fields added at the end of a struct (the growth rjq.h's
# "Extensible structs" allows): a field removed, moved or retyped, a
# struct that shrank, an enumerator removed or renumbered, a function's
# parameters or return type changed. Compatible changes (functions,
# enumerators and fields at the end added) pass, and are printed. With a
# new SONAME anything passes (then refresh the baseline). Exits 77
# (ctest: skipped) without abidw/abidiff (Debian: abigail-tools).
set -euo pipefail
refresh=0
if [[ ${1:-} == --refresh ]]; then refresh=1; shift; fi
lib=${1:?usage: abi-check.sh [--refresh] LIB SRCDIR}
src=${2:?usage: abi-check.sh [--refresh] LIB SRCDIR}
baseline=$src/abi/librjq.abi
supp=$src/abi/suppressions.ini
for t in abidw abidiff; do
    command -v $t >/dev/null || { echo "abi-check: no $t (Debian: abigail-tools): skipped"; exit 77; }
done
t=$(mktemp -d "${TMPDIR:-/tmp}/rjq-abi.XXXXXX")
trap 'rm -rf "$t"' EXIT
# Only what include/ declares; no paths, locations or DT_NEEDED (they
# differ between machines and say nothing of the ABI).
# (LIB may be an abixml made so already: tests/abi/selftest.sh)
if [[ $lib == *.abi ]]; then
    cp "$lib" "$t/now.abi"
else
    abidw --headers-dir "$src/include" --drop-private-types --no-corpus-path --no-comp-dir-path \
          --no-show-locs --no-elf-needed --out-file "$t/now.abi" "$lib"
fi
if ((refresh)); then
    cp "$t/now.abi" "$baseline"
    echo "abi-check: $baseline now holds the ABI of $lib"
    exit 0
fi
[[ -f $baseline ]] || { echo "abi-check: no baseline $baseline (scripts/abi-check.sh --refresh)"; exit 1; }
soname() { sed -n "1s/.*soname='\([^']*\)'.*/\1/p" "$1"; }
old=$(soname "$baseline") new=$(soname "$t/now.abi")
rc=0
abidiff --suppressions "$supp" "$baseline" "$t/now.abi" >"$t/report" || rc=$?
if ((rc & 3)); then
    cat "$t/report"
    echo "abi-check: abidiff failed (status $rc)"
    exit 1
fi
((rc == 0)) && { echo "abi-check: the ABI of $new is the baseline's"; exit 0; }
# The type changes abidiff leaves to us: anything but growth at a struct's end.
why=$(awk '
    /type size changed from [0-9]+ to [0-9]+/ {
        match($0, /from [0-9]+ to [0-9]+/); split(substr($0, RSTART, RLENGTH), a, " ");
        old = a[2] + 0;
        if (a[4] + 0 < old) print "shrank: " $0;
        next }
    /data member insertion|data members insertion/ { inserting = 1; next }
    inserting && /at offset [0-9]+ \(in bits\)/ {
        match($0, /at offset [0-9]+/); off = substr($0, RSTART + 10, RLENGTH - 10) + 0;
        if (off < old) print "inserted before the end: " $0;
        next }
    { inserting = 0 }
    /offset changed from/ || /data members? deletion/ || /type of .* changed/ ||
    /enumerators? deletion/ || /enumerator .* value changed/ || /return type changed/ ||
    /parameter [0-9]+ of type .* (was added|was removed)/ || /size of symbol changed/ ||
    /type name changed/ || /underlying type changed from/ { print $0 }
' "$t/report")
if ((rc & 8)) || [[ -n $why ]]; then
    sed 's/^/  /' "$t/report"
    [[ -n $why ]] && printf 'abi-check: incompatible:\n%s\n' "$why"
    if [[ $old == "$new" ]]; then
        echo "abi-check: FAILED: an incompatible ABI change, and the SONAME is still $new:"
        echo "  bump RJQ_SOVERSION in CMakeLists.txt (README \"ABI\"), or undo the change"
        exit 1
    fi
    echo "abi-check: incompatible, with a new SONAME ($old -> $new): passes; refresh the baseline at the release"
    exit 0
fi
sed 's/^/  /' "$t/report"
echo "abi-check: compatible changes only (SONAME $new): passes"
