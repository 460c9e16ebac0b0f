//! The soak's fake agent: a bash script named `claude` first on PATH (as in
//! figures.rs), streaming Claude Code stream-json through a small Python
//! generator for a few seconds (2 KB to 2 MB a run), then committing one file
//! of its own. Some stories fail on purpose on their first attempt, so the
//! report can tell scripted re-runs from re-runs the faults caused:
//! `fail` (a FAIL tag, nothing committed), `ignore` (traps SIGTERM and
//! outlives `loop.timeout_seconds`: ralph must SIGKILL it), `broken` (its
//! work fails validation once; the fix-up mends it).
//! Every run appends `start` and `end` lines to a trace outside the project
//! (so a full disk there loses none of them).

use std::collections::BTreeMap;

/// What a story's first attempt is scripted to do.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Script {
    Fail,
    Ignore,
    Broken,
}

/// The stories scripted to misbehave once: about 2 % fail, 1 % ignore
/// SIGTERM, 1.5 % break validation, each class at least 3 times.
pub fn scripted(stories: u64) -> BTreeMap<u64, Script> {
    let mut m = BTreeMap::new();
    let spread = |per: u64, offset: u64| {
        let every = (stories / 3).min(per).max(1);
        (1..=stories).filter(move |n| n % every == offset % every)
    };
    for n in spread(50, 7) {
        m.insert(n, Script::Fail);
    }
    for n in spread(100, 13) {
        m.entry(n).or_insert(Script::Ignore);
    }
    for n in spread(66, 29) {
        m.entry(n).or_insert(Script::Broken);
    }
    m
}

/// Agent runs a story is scripted to take: one, plus one for each
/// scripted failure (a fix-up after a broken validation is one more run).
pub fn scripted_runs(s: Option<&Script>) -> usize {
    if s.is_some() {
        2
    } else {
        1
    }
}

fn ids(m: &BTreeMap<u64, Script>, s: Script) -> String {
    let v: Vec<String> = m
        .iter()
        .filter(|(_, k)| **k == s)
        .map(|(n, _)| n.to_string())
        .collect();
    if v.is_empty() {
        "__none__".into()
    } else {
        v.join("|")
    }
}

/// The agent script. `dur_ms` is the range of a normal run's length.
pub fn script(trace: &str, gen: &str, m: &BTreeMap<u64, Script>, dur_ms: (u64, u64)) -> String {
    AGENT
        .replace("@TRACE@", trace)
        .replace("@GEN@", gen)
        .replace("@PY@", PYTHON)
        .replace("@DMIN@", &dur_ms.0.to_string())
        .replace("@DSPAN@", &(dur_ms.1 - dur_ms.0).max(1).to_string())
        .replace("@FAIL@", &ids(m, Script::Fail))
        .replace("@IGNORE@", &ids(m, Script::Ignore))
        .replace("@BROKEN@", &ids(m, Script::Broken))
}

const AGENT: &str = r#"#!/bin/bash
prompt="$(cat)"
first="$(printf '%s\n' "$prompt" | grep -m1 'implement Story ')"
id="${first#*implement Story }"; id="${id%%:*}"
[ -n "$id" ] || id="$RALPH_STORY"
trace=@TRACE@
n=$(( $(grep -c " start $id " "$trace" 2>/dev/null) + 1 ))
mode=normal
case "$prompt" in *"Fix it up"*) mode=fixup ;; esac
if [ "$mode" = normal ] && [ "$n" = 1 ]; then
  case "$id" in
    @FAIL@) mode=fail ;;
    @IGNORE@) mode=ignore ;;
    @BROKEN@) mode=broken ;;
  esac
fi
now() { date +%s.%3N; }
printf '%s start %s %s %s\n' "$(now)" "$id" "$n" "$mode" >> "$trace"
end() { printf '%s end %s %s %s\n' "$(now)" "$id" "$n" "$1" >> "$trace"; }
say() { printf '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"%s"}]}}\n' "$1"; }
result() { printf '{"type":"result","subtype":"success","is_error":false,"result":"%s","num_turns":4,"total_cost_usd":0.002,"usage":{"input_tokens":1200,"output_tokens":300,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}\n' "$1"; }
printf '{"type":"system","subtype":"init","session_id":"soak-%s-%s","tools":["Bash","Edit","Read"]}\n' "$id" "$n"
h=$(( (id * 2654435761) % 1000003 + n * 7919 ))
dur=$(( @DMIN@ + h % @DSPAN@ ))
b=$(( h % 100 ))
if [ $b -lt 70 ]; then size=$(( 2048 + h % 49152 ))
elif [ $b -lt 95 ]; then size=$(( 51200 + h % 460800 ))
else size=$(( 524288 + h % 1572864 )); fi
if [ "$mode" = ignore ]; then
  # Deaf to SIGTERM (sleep inherits the ignored signal): only SIGKILL ends it.
  trap '' TERM
  @PY@ @GEN@ soak-gen "$id" 200000 5000
  say "thinking very hard about $id"
  sleep 3600
  end ignored-timeout
  exit 0
fi
if [ "$mode" = fixup ]; then size=4096; dur=1000; fi
@PY@ @GEN@ soak-gen "$id" "$size" "$dur"
if [ "$mode" = fail ]; then
  say "cannot do $id yet"
  result "<ralph>FAIL $id: scripted failure</ralph>"
  end scripted-fail
  exit 0
fi
mkdir -p bench-out
if [ "$mode" = broken ]; then body="story $id
BROKEN"; else body="story $id"; fi
if printf '%s\n' "$body" > "bench-out/$id.txt" && git add "bench-out/$id.txt" \
   && git commit -q -m "feat(story-$id): soak change ($mode)" >/dev/null 2>&1; then
  say "implemented $id"
  result "done <ralph>DONE $id</ralph>"
  end "ok-$mode"
else
  say "git commit failed for $id"
  result "could not commit"
  end commit-failed
  exit 1
fi
"#;

/// An interpreter by its full path: a pyenv shim on PATH needs the
/// user's HOME, which the agents do not get.
pub const PYTHON: &str = "/usr/bin/python3";

/// The stream-json generator: `size` bytes of assistant text, tool calls
/// and tool results, spread over `dur` milliseconds.
pub const GEN: &str = r#"
import json, sys, time
_, _, sid, size, dur = sys.argv
size, dur = int(size), int(dur) / 1000.0
words = ("the parser keeps every line under a megabyte and the merge queue "
         "lands one story at a time while tests run in the worktree").split()
def prose(n, seed):
    out, i, s = [], seed, 0
    while s < n:
        w = words[i % len(words)]
        out.append(w); s += len(w) + 1; i = i * 7 + 3
    return " ".join(out)
lines = []
for k in range(8):
    lines.append(json.dumps({"type": "assistant", "message": {"id": "msg_%s_%d" % (sid, k), "role": "assistant",
        "content": [{"type": "text", "text": prose(2500, k)}]}}) + "\n")
    lines.append(json.dumps({"type": "assistant", "message": {"id": "msg_%s_%db" % (sid, k), "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_%d" % k, "name": "Bash",
                     "input": {"command": "cat src/module_%d.rs" % k}}]}}) + "\n")
    lines.append(json.dumps({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
        "tool_use_id": "toolu_%d" % k, "content": prose(3500, k + 5), "is_error": False}]}}) + "\n")
start = time.time()
steps = max(1, int(dur / 0.25))
per = max(1, size // steps)
out = sys.stdout
written, i = 0, 0
for s in range(steps):
    goal = min(size, (s + 1) * per)
    while written < goal:
        l = lines[i % len(lines)]; i += 1
        out.write(l); written += len(l)
    out.flush()
    left = start + (s + 1) * dur / steps - time.time()
    if left > 0:
        time.sleep(left)
"#;
