#!/usr/bin/env bash
# The newcomer demo: builds ralph, copies sandbox/demo (a small backlog for a bash
# "text toolkit") into a fresh temporary git repository, and lets ralph run the
# whole backlog there with the scripted agent sandbox/demo/bin/demo-agent
# (no Claude Code, no network). Nothing in this repository is changed.
#
#   sandbox/run-demo.sh            # from anywhere
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"

# Bold headings on a terminal only: piped (or with NO_COLOR, or TERM=dumb)
# the output stays plain text.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ] && [ "${TERM:-}" != dumb ]; then
    section() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
else
    section() { printf '\n==> %s\n' "$*"; }
fi

section "Building ralph (cargo build --release)"
(cd "$repo" && cargo build --release)
target_dir="${CARGO_TARGET_DIR:-target}"
case $target_dir in /*) ;; *) target_dir="$repo/$target_dir" ;; esac
ralph="$target_dir/release/ralph"
if [ ! -x "$ralph" ]; then
    echo "run-demo: the build left no binary at $ralph" >&2
    exit 1
fi

section "Setting up the demo project"
work="$(mktemp -d "${TMPDIR:-/tmp}/ralph-demo.XXXXXX")"
cp -R "$here/demo/." "$work/"
cd "$work"
git init -q -b main 2>/dev/null || { git init -q && git symbolic-ref HEAD refs/heads/main; }
git config user.name "Ralph Demo"
git config user.email "ralph-demo@example.invalid"
git add -A
git commit -q -m "demo: toolkit backlog (3 epics, 8 stories)"
echo "project: $work"
echo "backlog:"
grep -v '^[[:space:]]*$' .ralph/stories.txt | sed 's/^/    /'

section "ralph graph (what waits for what)"
"$ralph" graph || true

section "ralph run --parallel -j 3"
echo "The agent is sandbox/demo/bin/demo-agent, a script: the token counts and"
echo "costs below are made up by it (scripted), not real API usage."
set +e
"$ralph" run --parallel -j 3
rc=$?
set -e

section "ralph status"
"$ralph" status || true

section "ralph stories"
"$ralph" stories || true

section "git log --oneline --graph -n 30"
git --no-pager log --oneline --graph -n 30 || true

section "The toolkit's tests on main (bash tests/run.sh)"
bash tests/run.sh || true

if [ -x bin/tt ]; then
    section "Try it"
    echo '$ bin/tt slugify "Hello, World!"'
    bin/tt slugify "Hello, World!" || true
    echo '$ bin/tt title the quick BROWN fox'
    bin/tt title the quick BROWN fox || true
fi

section "Done (ralph exited with $rc)"
echo "The demo project is in $work"
echo "Look at $work/progress.txt, or cd there and run:"
echo "  $ralph status        # progress, tokens and (scripted) cost"
echo "  $ralph log 2.3 -a 1  # the attempt that failed on purpose, as text"
echo "Token and cost figures in this demo are scripted by the demo agent."
exit "$rc"
