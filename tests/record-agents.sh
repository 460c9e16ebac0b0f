#!/usr/bin/env bash
# Re-records tests/fixtures/agents/claude/ and tests/fixtures/agents/codex/:
# the real Claude Code and Codex CLIs (installed from npm at the versions
# tests/it/clis.rs pins, ~250 MB each, into target/agent-clis/) run against
# the scripted model APIs of tests/it/fakeapi.rs on 127.0.0.1. Nothing else
# is reached. Then check the decoders still read them:
#   cargo test --locked --lib agent::
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --locked --test it -- --ignored --test-threads 1 --nocapture \
    record::record_claude_code record::record_codex "$@"
