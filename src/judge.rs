//! Best of N's judge (issue 36, `attempts.pick: judge` with
//! `attempts.judge.agent`): the prompt it is given — the story, then each
//! passing candidate's validation and diff, cut short — and the rule for
//! its answer. Pure; `run/judge.rs` runs it.

/// Most of the candidates' diffs together a judge is shown.
pub(crate) const DIFF_BYTES: usize = 60_000;

/// One passing candidate, as the judge sees it.
pub(crate) struct Shown<'a> {
    pub(crate) k: u32,
    /// `agent` or `agent:model`.
    pub(crate) who: &'a str,
    /// What it passed, in words.
    pub(crate) validation: &'a str,
    pub(crate) diff: &'a str,
}

/// The judge's prompt for story `id`: its spec, then each candidate.
pub(crate) fn prompt(id: &str, title: &str, spec: &str, shown: &[Shown<'_>]) -> String {
    let mut out = format!(
        "You judge {} candidate solutions to story {id} ({title}). Each one's work, merged \
         onto the target branch's tip, passed the project's required validation. Pick the one \
         that best does what the story asks, with the smallest and clearest change that does \
         it. Change no file. Give your reasons in a few lines, then end with exactly one line \
         `<ralph>PICK k</ralph>`, k the candidate's number.\n\n## The story\n\n{}\n",
        shown.len(),
        spec.trim_end()
    );
    for s in shown {
        out.push_str(&format!(
            "\n## Candidate {} ({})\n\nValidation: {}\n\n```diff\n{}\n```\n",
            s.k,
            s.who,
            s.validation,
            s.diff.trim_end()
        ));
    }
    out
}

/// The judge's pick when it names a passing candidate; `None` (the
/// ranking decides) for no answer or any other number.
pub(crate) fn valid_pick(pick: Option<u32>, passing: &[u32]) -> Option<u32> {
    pick.filter(|k| passing.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_shows_the_story_then_each_candidate() {
        let shown = [
            Shown {
                k: 1,
                who: "claude:opus",
                validation: "passed: tests",
                diff: "+a\n",
            },
            Shown {
                k: 3,
                who: "codex",
                validation: "passed: tests",
                diff: "+b\n",
            },
        ];
        let p = prompt("1.1", "Parser", "# Story 1.1\n\nParse it.\n", &shown);
        assert!(p.starts_with("You judge 2 candidate solutions to story 1.1 (Parser)."));
        assert!(p.contains("<ralph>PICK k</ralph>"));
        let (one, three) = (
            p.find("## Candidate 1 (claude:opus)"),
            p.find("## Candidate 3 (codex)"),
        );
        assert!(one.unwrap() < three.unwrap(), "{p}");
        assert!(p.contains("```diff\n+b\n```"), "{p}");
    }

    #[test]
    fn only_a_passing_candidate_is_a_valid_pick() {
        assert_eq!(valid_pick(Some(2), &[1, 2]), Some(2));
        assert_eq!(valid_pick(Some(3), &[1, 2]), None);
        assert_eq!(valid_pick(None, &[1, 2]), None);
    }
}
