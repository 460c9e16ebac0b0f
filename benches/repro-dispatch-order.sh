#!/bin/bash
# Reproduces BENCHMARKS.md "Findings" 1: a slot freed by a finishing story is
# refilled before that story lands, so its dependent loses the slot.
# Usage: benches/repro-dispatch-order.sh [path/to/ralph] [ralph run args...]
# (default args: --parallel -j 2). 1.4 runs 2 s and holds one slot; when 1.1
# ends, its slot should go to 1.2 (priority 10, ready as soon as 1.1 lands);
# ralph a52e890 gave it to 1.5 (priority 1) before 1.1 had landed; a0bfc52
# keeps it for 1.2 (start order 1.1 1.4 1.2 1.3 1.5).
set -euo pipefail
ralph="$(realpath "${1:-target/release/ralph}")"
shift || true
[ $# -gt 0 ] || set -- --parallel -j 2
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/p/.ralph" "$tmp/p/specs/epic-1"
cd "$tmp/p"
git init -q -b main
git config user.name bench
git config user.email bench@example.com
printf '# [batch:1]\n1.1 | A\n1.2 | B\n1.3 | C\n1.4 | D\n1.5 | E\n' > .ralph/stories.txt
echo '{}' > .ralph/config.json
spec() { printf -- '---\nid: "%s"\nestimation: %s\ndepends_on: [%s]\n---\n# Story %s\n' "$1" "$2" "$3" "$1" \
  > "specs/epic-1/story-$1-x.md"; }
spec 1.1 small ''
spec 1.2 large '"1.1"'
spec 1.3 large '"1.2"'
spec 1.4 small ''
spec 1.5 small ''
echo demo > README.md
git add -A
git commit -qm init
cat > "$tmp/bin/claude" <<'AGENT'
#!/bin/bash
p="$(cat)"; f="$(printf '%s\n' "$p" | grep -m1 'implement Story ')"; id="${f#*implement Story }"; id="${id%%:*}"
if [ "$id" = 1.4 ]; then sleep 2; else sleep 0.3; fi
echo "$id" > "f-$id.txt"; git add "f-$id.txt"; git commit -qm "story $id"
printf '{"type":"result","subtype":"success","is_error":false,"result":"<ralph>DONE %s</ralph>","usage":{"input_tokens":1,"output_tokens":1}}\n' "$id"
AGENT
chmod +x "$tmp/bin/claude"
PATH="$tmp/bin:$PATH" "$ralph" run "$@" > /dev/null 2>&1 || echo "ralph exited $?"
grep -E '] (start story|landed story)' ralph.log | sed 's/ as [0-9a-f]*$//'
echo "start order: $(sed -n 's/.*] start story \([^ ]*\) .*/\1/p' ralph.log | tr '\n' ' ')"
