#!/usr/bin/env bash
# Runs every tests/test_*.sh of the toolkit. Passes when all of them pass,
# and when there are none yet (before the first story has landed).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
shopt -s nullglob

failed=0

# Every script of the toolkit must at least parse.
for f in bin/tt lib/*.sh tests/*.sh; do
    [ -f "$f" ] || continue
    if ! bash -n "$f"; then
        echo "SYNTAX $f"
        failed=$((failed + 1))
    fi
done

tests=(tests/test_*.sh)
if [ ${#tests[@]} -eq 0 ]; then
    echo "no tests yet: nothing to check"
    exit "$(( failed > 0 ))"
fi

passed=0
for t in "${tests[@]}"; do
    if out=$(bash "$t" 2>&1); then
        echo "PASS $t"
        passed=$((passed + 1))
    else
        echo "FAIL $t"
        printf '%s\n' "$out" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
