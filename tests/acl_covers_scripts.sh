#!/usr/bin/env bash
# Every Redis command rjq's scripts (src/lua) run is allowed to the worker
# role of `rjq acl`, whose scripts reach them all: a command added to a
# script without its ACL rule fails here, not in production with NOPERM.
# (tests/test_acl.c runs each role's work under its own lines.)
set -eu
build=${RJQ_BUILD:?RJQ_BUILD must name the build folder}
src=${RJQ_SOURCE:?RJQ_SOURCE must name the source folder}
line=$("$build/rjq" acl --role worker | grep '^ACL SETUSER rjq-worker ')
cmds=$(grep -ohE "(redis\.p?call|call_all|typed)\(('[a-z]+', *)?'[A-Z]+'" "$src"/src/lua/*.lua |
       grep -oE "'[A-Z]+'$" | tr -d "'" | sort -u)
[ -n "$cmds" ] || { echo "FAIL: no commands found in the scripts" >&2; exit 1; }
# (publishes name their command by a variable: PUBLISH, or SPUBLISH on a cluster)
grep -q "PUB or pub_mode()" "$src"/src/lua/*.lua && cmds="$cmds PUBLISH SPUBLISH"
missing=""
for c in $cmds; do
    rule="+$(echo "$c" | tr 'A-Z' 'a-z')"
    [ "$c" = PUBSUB ] && rule="+pubsub|numsub +pubsub|shardnumsub"
    [ "$c" = CLUSTER ] && rule="+cluster|myid +cluster|slots"
    for r in $rule; do
        case " $line " in *" $r "*) ;; *) missing="$missing $r" ;; esac
    done
    continue
    case " $line " in *" $rule "*) ;; *) missing="$missing $rule" ;; esac
done
[ -z "$missing" ] || { echo "FAIL: the worker's ACL line lacks:$missing" >&2; exit 1; }
echo "PASS: $(echo $cmds | wc -w) script commands, all in the worker's ACL line"
