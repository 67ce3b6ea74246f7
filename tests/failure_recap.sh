#!/usr/bin/env bash
# After a failed ctest run in BUILD_DIR: print each failed test's own output
# again, last, so that the tail of a long CI log says why it failed.
# Usage: tests/failure_recap.sh BUILD_DIR [PASS_NAME]
dir="$1/Testing/Temporary"
[ -s "$dir/LastTestsFailed.log" ] || exit 0
echo "==================== failed tests${2:+ of the $2}, their output ===================="
while IFS=: read -r _ name; do
    awk -v name="$name" '
        !on && substr($0, length($0) - length(name) - 8) == "Testing: " name { on = 1 }
        on { print }
        on && index($0, "\"" name "\" time elapsed") { exit }
    ' "$dir/LastTest.log"
done < "$dir/LastTestsFailed.log"
echo "===================================================================="
