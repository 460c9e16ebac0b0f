# Helpers sourced by tests/test_*.sh (not a test itself).
# TT is the toolkit's entry point; check compares an expected and an actual value.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TT="$ROOT/bin/tt"
failures=0

# check <label> <expected> <actual>
check() {
    if [ "$2" = "$3" ]; then
        echo "ok   - $1"
    else
        echo "FAIL - $1: expected '$2', got '$3'"
        failures=$((failures + 1))
    fi
}

# finish: the test's exit status
finish() {
    [ "$failures" -eq 0 ]
}
