#!/bin/bash
# Issue 21, defect 1: does a user committing in the main checkout during a
# run revert landed stories? The user runs `git add … && git commit` (a bare
# commit, which reads the index before it takes index.lock) in a loop while
# 30 stories land with `-j 2` on a ~3k-file project, both CPUs loaded by
# `yes`. After the run the user commits once more (what records a stale
# index), then the script counts the stories state.json calls done whose
# files are missing from main's tip.
#
# Usage: benches/race-user-commits.sh [path/to/ralph] [tries]
# (default: target/release/ralph, 5 tries). One line per try, then a total.
# Each try is bounded (ralph: 10 min); the temp dirs are removed.
# PACE=s: the user's pause between commits (default 0.02; 0 = a tight loop).
# Figures: BENCHMARKS.md section 10.
set -uo pipefail
ralph="$(realpath "${1:-target/release/ralph}")"
tries="${2:-5}"
stories="${STORIES:-30}"
filler="${FILLER:-3000}"
# Set KEEP=dir to keep each try's ralph.log, stderr and git log there.
keep="${KEEP:-}"
loaders=()
stop_load() {
  for p in "${loaders[@]}"; do kill "$p" 2>/dev/null; done
  loaders=()
}
trap stop_load EXIT

one_try() {
  local tmp p
  tmp="$(mktemp -d)"
  p="$tmp/p"
  mkdir -p "$tmp/bin" "$tmp/scratch" "$p/.ralph"
  cd "$p" || return 1
  git init -q -b main
  git config user.name bench
  git config user.email bench@example.com
  git config gc.auto 0
  {
    echo '# [batch:1]'
    for i in $(seq 1 "$stories"); do echo "1.$i | Story $i"; done
  } > .ralph/stories.txt
  echo '{ "loop": { "max_retries": 2, "grace_seconds": 1 }, "decomposition": { "enabled": false }, "postmortem": { "enabled": false }, "sandbox": { "mode": "off" } }' > .ralph/config.json
  mkdir -p specs/epic-1
  for i in $(seq 1 "$stories"); do
    printf -- '---\nid: "1.%s"\nstatus: pending\n---\n\n# Story 1.%s\n' "$i" "$i" \
      > "specs/epic-1/story-1.$i-x.md"
  done
  for i in $(seq 0 $((filler - 1))); do
    d="src/m$((i % 100))"
    [ -d "$d" ] || mkdir -p "$d"
    echo "$i" > "$d/f$i.txt"
  done
  git add -A
  git commit -qm init
  # An instant agent: three files of its own, committed, then DONE.
  cat > "$tmp/bin/claude" <<'AGENT'
#!/bin/bash
p="$(cat)"; f="$(printf '%s\n' "$p" | sed -n 's/.*implement Story \([^:]*\):.*/\1/p' | head -1)"
touch "$SCRATCH/started"
mkdir -p "story/$f"
for n in 1 2 3; do echo "story $f file $n" > "story/$f/s$n.txt"; done
git add "story/$f" && git commit -qm "feat(story-$f): files"
printf '{"type":"result","subtype":"success","is_error":false,"result":"<ralph>DONE %s</ralph>","usage":{"input_tokens":1,"output_tokens":1}}\n' "$f"
AGENT
  chmod +x "$tmp/bin/claude"
  export SCRATCH="$tmp/scratch"
  local start end
  start=$(date +%s.%N)
  PATH="$tmp/bin:$PATH" timeout 600 "$ralph" run --parallel -j 2 \
    > "$tmp/ralph.out" 2> "$tmp/ralph.err" &
  local ralph_pid=$!
  for _ in $(seq 1 3000); do
    [ -e "$SCRATCH/started" ] && break
    kill -0 "$ralph_pid" 2>/dev/null || break
    sleep 0.02
  done
  # The user: a bare `git commit` after each `git add`, at a person's
  # quick pace; a failure (a lock, HEAD moved) is retried like a person would.
  (
    mkdir -p user
    i=0
    while [ ! -e "$SCRATCH/stop" ]; do
      i=$((i + 1))
      echo "user file $i" > "user/u$i.txt"
      git add "user/u$i.txt" 2>/dev/null && git commit -qm "user $i" > /dev/null 2>&1 \
        && echo "$i" >> "$SCRATCH/user-commits"
      sleep "${PACE:-0.02}"
    done
  ) &
  local user_pid=$!
  wait "$ralph_pid"
  local code=$?
  touch "$SCRATCH/stop"
  wait "$user_pid"
  end=$(date +%s.%N)
  # The user's next commit: whatever the index holds now is recorded.
  git add -A user 2> /dev/null
  git commit -qm "user: after the run" > /dev/null 2>&1
  local done_n reverted=0 warned ids
  done_n=$(grep -o '"status": *"done"' .ralph/state.json 2>/dev/null | wc -l)
  ids=$(grep -o 'merge: story [0-9.]*' <(git log --format=%s main) | awk '{print $3}')
  local tree
  tree="$(git ls-tree -r --name-only main)"
  for id in $ids; do
    for n in 1 2 3; do
      if ! grep -qx "story/$id/s$n.txt" <<< "$tree"; then
        reverted=$((reverted + 1))
        echo "  story $id: story/$id/s$n.txt is gone from main" >&2
        break
      fi
    done
  done
  warned=$(grep -c '^warning: story .* landed, but commit' "$tmp/ralph.err")
  local user_n
  user_n=$(wc -l < "$SCRATCH/user-commits" 2>/dev/null || echo 0)
  printf 'done=%s/%s reverted=%s warned=%s ralph_exit=%s user_commits=%s secs=%.0f\n' \
    "$done_n" "$stories" "$reverted" "$warned" "$code" "$user_n" "$(echo "$end - $start" | bc)"
  if [ -n "$keep" ]; then
    mkdir -p "$keep/try-$t"
    cp ralph.log "$tmp/ralph.err" "$tmp/ralph.out" "$keep/try-$t/" 2> /dev/null
    git log --format='%h %s' main > "$keep/try-$t/main.log"
  fi
  cd / && rm -rf "$tmp"
  return "$reverted"
}

total=0
bad=0
for t in $(seq 1 "$tries"); do
  # NOLOAD=1: no `yes` of its own (another run already loads the CPUs).
  if [ -z "${NOLOAD:-}" ]; then
    yes > /dev/null & loaders+=($!)
    yes > /dev/null & loaders+=($!)
  fi
  printf 'try %s: ' "$t"
  one_try
  r=$?
  stop_load
  total=$((total + r))
  [ "$r" -gt 0 ] && bad=$((bad + 1))
done
echo "tries with reverted stories: $bad of $tries; stories reverted in all: $total"
