#!/usr/bin/env bash
# scripts/abi-check.sh fails on an incompatible change without a new
# SONAME and passes the rest: each case is a copy of the baseline
# (abi/librjq.abi) changed as a library with that change would be.
set -euo pipefail
src=${RJQ_SOURCE:?}
check=$src/scripts/abi-check.sh
command -v abidiff >/dev/null || { echo "no abidiff (abigail-tools): skipped"; exit 77; }
t=$(mktemp -d "${TMPDIR:-/tmp}/rjq-abi-selftest.XXXXXX")
trap 'rm -rf "$t"' EXIT
py=/usr/bin/python3
# variant NAME PYTHON: $t/NAME.abi, the baseline with PYTHON applied to its text s
variant() {
    "$py" - "$src/abi/librjq.abi" "$t/$1.abi" "$2" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
exec(sys.argv[3])
open(sys.argv[2], 'w').write(s)
PY
}
fails=0
expect() { # expect pass|fail NAME
    local got=pass
    bash "$check" "$t/$2.abi" "$src" >"$t/$2.out" 2>&1 || got=fail
    if [[ $got != "$1" ]]; then
        echo "FAILED: $2: expected $1, got $got"; sed 's/^/    /' "$t/$2.out"; fails=1
    else
        echo "ok: $2 ($1)"
    fi
}
soname='s = s.replace("soname=\x27librjq.so.0\x27", "soname=\x27librjq.so.1\x27", 1)'
# the same ABI
variant same 'pass'
expect pass same
# a function removed (its symbol and declaration)
rm_fn='s = re.sub(r"\n *<elf-symbol name=\x27rjq_version\x27[^\n]*", "", s, count=1)
s = re.sub(r"\n *<function-decl name=\x27rjq_version\x27.*?</function-decl>", "", s, count=1, flags=re.S)'
variant removed "$rm_fn"
expect fail removed
variant removed_bumped "$rm_fn
$soname"
expect pass removed_bumped
# two fields of rjq_queue_options swapped (retention_ms and job_timeout_ms)
swap='m = re.search(r"<class-decl name=\x27rjq_queue_options\x27.*?</class-decl>", s, re.S)
c = m.group(0)
c = c.replace("layout-offset-in-bits=\x2764\x27", "layout-offset-in-bits=\x27X\x27", 1)
c = c.replace("layout-offset-in-bits=\x27320\x27", "layout-offset-in-bits=\x2764\x27", 1)
c = c.replace("layout-offset-in-bits=\x27X\x27", "layout-offset-in-bits=\x27320\x27", 1)
s = s[:m.start()] + c + s[m.end():]'
variant swapped "$swap"
expect fail swapped
# a field added at the end of rjq_queue_options (the growth rjq.h allows)
grow='m = re.search(r"(<class-decl name=\x27rjq_queue_options\x27 size-in-bits=\x27)(\d+)(\x27.*?)(\n *)(</class-decl>)", s, re.S)
old = int(m.group(2))
tail = m.group(3)
last = re.findall(r"\n *<data-member access=\x27public\x27 layout-offset-in-bits=\x27\d+\x27>\n *<var-decl name=\x27\w+\x27 type-id=\x27(type-id-\d+)\x27 visibility=\x27default\x27/>\n *</data-member>", tail)[-1]
add = "\n      <data-member access=\x27public\x27 layout-offset-in-bits=\x27%d\x27>\n        <var-decl name=\x27newer_ms\x27 type-id=\x27%s\x27 visibility=\x27default\x27/>\n      </data-member>" % (old, last)
s = s[:m.start()] + m.group(1) + str(old + 64) + tail + add + m.group(4) + m.group(5) + s[m.end():]'
variant grown "$grow"
expect pass grown
exit $fails
