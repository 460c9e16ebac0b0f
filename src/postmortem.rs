//! The timeout postmortem (issue 12, Ralph v2 §3.4): after an attempt ran
//! into its timeout, a short agent run reads the spec's head and the end of
//! what the attempt printed and says why, as `LEARN` tags that are stored
//! like any learning, so the retry and later stories benefit. Pure: the
//! prompt; the attempt runs it.

/// The built-in prompt (override: `.ralph/templates/timeout-postmortem.md`,
/// with Ralph v2's variables STORY_ID, SPEC_CONTENT, PARTIAL_OUTPUT).
/// Cache-friendly as the implement prompt (issue 25): up to
/// `prompt::STORY_PART` it is the same for every postmortem of a run; the
/// story's part follows, naming it and the exact lines to write.
pub(crate) const TEMPLATE: &str = "\
You are an autonomous coding agent. An agent working on a story ran out of
time: it was stopped without finishing. The story and the end of what that
agent printed are at the end of this prompt.

Do not change any file. Read what it was doing and say, for the next attempt, why it ran out of time and what to do instead.

## How to answer

Write each lesson as one line <ralph>LEARN: [Timeout postmortem for <id>] <one sentence></ralph>
(for example: a command that never ends and how to run it instead, a step to skip, a smaller order of work).
Then end with <ralph>TIMEOUT_POSTMORTEM_DONE <id></ralph>. The story's ID to write for <id> is given with it.

## Your story

Story {{STORY_ID}} ran out of time: its agent was stopped after {{TIMEOUT}} without finishing.
Your lines: <ralph>LEARN: [Timeout postmortem for {{STORY_ID}}] <one sentence></ralph>,
then <ralph>TIMEOUT_POSTMORTEM_DONE {{STORY_ID}}</ralph>.

## The story (its beginning)

{{SPEC_CONTENT}}

## The end of what the stopped attempt printed

{{PARTIAL_OUTPUT}}
";

/// The part of the spec the postmortem sees (Ralph v2: the first 5,000 bytes).
pub(crate) const SPEC_HEAD_BYTES: usize = 5_000;

/// The last `max_chars` characters of `text`, cut at a line start where
/// one is near, so the agent sees whole lines.
pub(crate) fn tail_chars(text: &str, max_chars: usize) -> &str {
    let total = text.chars().count();
    if total <= max_chars {
        return text;
    }
    let skip = total - max_chars;
    let start = text.char_indices().nth(skip).map_or(0, |(i, _)| i);
    let rest = &text[start..];
    match rest.find('\n') {
        Some(nl) if nl < 200 => &rest[nl + 1..],
        _ => rest,
    }
}

/// The first `max_bytes` of `text`, at a char boundary.
pub(crate) fn head_bytes(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_and_heads_cut_at_boundaries() {
        let text = "first line\nsecond line\nthird é line\n";
        assert_eq!(tail_chars(text, 1000), text);
        assert_eq!(tail_chars(text, 16), "third é line\n");
        assert_eq!(head_bytes("é", 1), "");
        assert_eq!(head_bytes("abc", 2), "ab");
    }
}
