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

section() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

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

section "ralph run --parallel -j 3"
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
echo "Look at $work/progress.txt and $work/.ralph/logs/, or cd there and run $ralph status"
exit "$rc"
