#!/usr/bin/env bash
# smoke.sh <fuzz target> <seed corpus dir> <seconds>: run the target from
# its seeds for that long. New inputs go to a scratch dir (the committed
# corpus is never written); a crash leaves its input in the build dir
# (crash-*) and fails the test.
set -euo pipefail
target=$1 seeds=$2 secs=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# every seed must run clean on its own first (a regression input fails here)
"$target" -runs=0 "$seeds" 2>"$scratch/seeds.log" || { cat "$scratch/seeds.log"; exit 1; }
"$target" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$PWD/crash-$(basename "$target")-" "$scratch" "$seeds" 2>"$scratch/run.log" ||
  { tail -n 60 "$scratch/run.log"; exit 1; }
grep -E "stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added" "$scratch/run.log" || true
