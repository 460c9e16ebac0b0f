//! The merge queue's batches (issue 34 item 2, docs/merge-queue.md): up to
//! `landing.batch` stories merged on each other form one candidate,
//! validated once at its top; a chain of candidates is validated side by
//! side (`landing.speculate`). A candidate of several stories that fails is
//! bisected: its halves are validated side by side, each on the target's
//! tip (where there is room under `landing.max_validations`), until the
//! failing story is alone in a candidate that failed; the others land
//! without it. Pure: `run/queue.rs` merges, validates and moves the target.
//!
//! A story is blamed only when a candidate holding it alone failed on a
//! tip (or on a passed chain before it), so a bisection's guesses never
//! send back a story whose own merge did not fail.

/// Stories (positions in the queue's request list) that are merged on
/// each other and validated together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) stories: Vec<usize>,
    /// It failed as a whole: split into halves rather than validated again.
    pub(crate) split: bool,
}

impl Group {
    fn new(stories: Vec<usize>) -> Group {
        Group {
            stories,
            split: false,
        }
    }
}

/// One candidate of a round: its stories merged on the target's tip
/// (`on_tip`) or on the candidate before it, validated at its top.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cand {
    pub(crate) stories: Vec<usize>,
    pub(crate) on_tip: bool,
}

/// A candidate's validation, as the round's decision needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Passed,
    /// The validation commands failed on its tree.
    Failed,
    /// It could not be validated (interrupted, the worktree, an error).
    Stopped,
    /// Not validated: a candidate before it in the chain failed.
    Thrown,
}

/// What a round's verdicts decide.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Decision {
    /// Candidates whose stories land, in order: a chain from the tip.
    pub(crate) land: Vec<usize>,
    /// Candidates of one story that failed: that story goes back to its
    /// agent with the failing output.
    pub(crate) culprits: Vec<usize>,
    /// The candidate that could not be validated: its first story gets
    /// that result, the rest go back to the queue.
    pub(crate) stopped: Option<usize>,
    /// What is left to land in this landing, in order (a failed batch
    /// to split first, then what was not built yet).
    pub(crate) plan: Vec<Group>,
    /// Stories that go back to the front of the run's queue (built on a
    /// failure): merged and validated again later, nothing charged.
    pub(crate) behind: Vec<usize>,
}

/// The `n` stories the queue took, cut into the fewest batches of at most
/// `batch`, as even as can be, in arrival order.
pub(crate) fn cut(n: usize, batch: usize) -> Vec<Group> {
    let batch = batch.max(1);
    let groups = n.div_ceil(batch);
    let mut out = Vec::with_capacity(groups);
    let mut next = 0;
    for g in 0..groups {
        // The first `n % groups` batches take one more.
        let size = n / groups + usize::from(g < n % groups);
        out.push(Group::new((next..next + size).collect()));
        next += size;
    }
    out
}

/// How many stories the next landing takes: `window` candidates of up to
/// `batch` stories each, or what waits.
pub(crate) fn take(window: usize, batch: usize, waiting: usize) -> usize {
    window.max(1).saturating_mul(batch.max(1)).min(waiting)
}

/// A round's candidates from the plan, at most `room` of them, and the
/// groups that wait for a later round. A group to split at the front is
/// validated as its two halves, each on the tip (the second only when
/// there is room beside the first); otherwise the groups form a chain,
/// each on the one before, up to the first group to split.
pub(crate) fn layout(plan: &[Group], room: usize) -> (Vec<Cand>, Vec<Group>) {
    let room = room.max(1);
    let Some(first) = plan.first() else {
        return (Vec::new(), Vec::new());
    };
    if first.split && first.stories.len() > 1 {
        let (l, r) = first.stories.split_at(first.stories.len() / 2);
        let mut cands = vec![Cand {
            stories: l.to_vec(),
            on_tip: true,
        }];
        let mut rest = Vec::new();
        if room >= 2 {
            cands.push(Cand {
                stories: r.to_vec(),
                on_tip: true,
            });
        } else {
            rest.push(Group::new(r.to_vec()));
        }
        rest.extend(plan[1..].iter().cloned());
        return (cands, rest);
    }
    let n = plan
        .iter()
        .take(room)
        .enumerate()
        .take_while(|(i, g)| *i == 0 || !g.split)
        .count();
    let cands = plan[..n]
        .iter()
        .enumerate()
        .map(|(i, g)| Cand {
            stories: g.stories.clone(),
            on_tip: i == 0,
        })
        .collect();
    (cands, plan[n..].to_vec())
}

/// The failed candidate `c`: its story to blame when it is alone, else the
/// group to split.
fn failed(cands: &[Cand], c: usize, d: &mut Decision) {
    if cands[c].stories.len() == 1 {
        d.culprits.push(c);
    } else {
        d.plan.push(Group {
            stories: cands[c].stories.clone(),
            split: true,
        });
    }
}

/// What the round's `verdicts` (one per candidate of `cands`, as `layout`
/// made them) decide, `rest` being the groups that waited.
///
/// A chain lands its longest passed prefix; the first failure is blamed
/// or split, what was built on it goes back to the run's queue, and the
/// groups that waited (not built yet) wait for the bisection. A bisection's
/// halves were each on the tip: the first that passed lands, a failed one
/// is blamed or split again, and a passed one that did not land is
/// validated again on the new tip.
pub(crate) fn decide(cands: &[Cand], verdicts: &[Verdict], rest: Vec<Group>) -> Decision {
    let mut d = Decision::default();
    let verdict = |i: usize| verdicts.get(i).copied().unwrap_or(Verdict::Stopped);
    let chain = cands.iter().skip(1).all(|c| !c.on_tip);
    if chain {
        let passed = (0..cands.len())
            .take_while(|&i| verdict(i) == Verdict::Passed)
            .count();
        d.land = (0..passed).collect();
        let Some(c) = cands.get(passed) else {
            d.plan = rest;
            return d;
        };
        match verdict(passed) {
            Verdict::Failed => failed(cands, passed, &mut d),
            _ => d.stopped = Some(passed),
        }
        for c in cands.iter().skip(passed + 1) {
            d.behind.extend(&c.stories);
        }
        if d.stopped.is_some() {
            // The landing cannot go on: what waited goes back too.
            d.behind.extend(c.stories.iter().skip(1));
            for g in rest {
                d.behind.extend(g.stories);
            }
        } else {
            // Not built yet: it waits for the bisection in this landing.
            d.plan.extend(rest);
        }
        return d;
    }
    for (i, c) in cands.iter().enumerate() {
        match verdict(i) {
            // Every story left it (a conflict, a gate): nothing to land.
            Verdict::Passed if c.stories.is_empty() => {}
            Verdict::Passed if d.land.is_empty() => d.land.push(i),
            Verdict::Passed => d.plan.push(Group::new(c.stories.clone())),
            Verdict::Failed => failed(cands, i, &mut d),
            Verdict::Stopped | Verdict::Thrown if d.stopped.is_none() => {
                d.stopped = Some(i);
                d.behind.extend(c.stories.iter().skip(1));
            }
            Verdict::Stopped | Verdict::Thrown => d.behind.extend(&c.stories),
        }
    }
    if d.stopped.is_some() {
        // The landing cannot go on: what is left goes back to the queue.
        for g in d.plan.drain(..).chain(rest) {
            d.behind.extend(g.stories);
        }
    } else {
        d.plan.extend(rest);
    }
    d
}

/// The candidates whose validations a failure of candidate `k` throws
/// away: those built on it, directly or through others.
pub(crate) fn built_on(cands: &[Cand], k: usize) -> Vec<usize> {
    (k + 1..cands.len())
        .take_while(|&j| !cands[j].on_tip)
        .collect()
}

/// The stories a candidate's tree holds: its own, and those of the
/// candidates it is built on.
pub(crate) fn holds(cands: &[Cand], k: usize) -> Vec<usize> {
    let from = (0..=k).rev().find(|&j| cands[j].on_tip).unwrap_or(0);
    cands[from..=k]
        .iter()
        .flat_map(|c| c.stories.iter().copied())
        .collect()
}

/// What the machine offers validations: its CPUs, and the memory a new
/// child could get (MB, when it can be read) with what one validation
/// needs (`landing.validation_memory_mb`, 0: no memory rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Machine {
    pub(crate) cpus: usize,
    pub(crate) available_mb: Option<u64>,
    pub(crate) per_validation_mb: u64,
}

/// The most validations at once on this machine: `landing.max_validations`
/// when set; else (`0`) one per CPU, and no more than memory holds at
/// `per_validation_mb` each, as `-j`'s memory rule does
/// (`schedule::jobs_now`); never fewer than one.
pub(crate) fn room(max_validations: usize, m: Machine) -> usize {
    if max_validations > 0 {
        return max_validations;
    }
    let by_memory = match (m.available_mb, m.per_validation_mb) {
        (Some(mb), per) if per > 0 => usize::try_from(mb / per).unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    m.cpus.min(by_memory).max(1)
}

#[cfg(test)]
mod tests {
    use super::Verdict::*;
    use super::*;

    fn g(stories: &[usize]) -> Group {
        Group::new(stories.to_vec())
    }

    fn split(stories: &[usize]) -> Group {
        Group {
            stories: stories.to_vec(),
            split: true,
        }
    }

    fn sizes(groups: &[Group]) -> Vec<usize> {
        groups.iter().map(|g| g.stories.len()).collect()
    }

    #[test]
    fn waiting_stories_are_cut_into_the_fewest_even_batches() {
        for (n, batch, want) in [
            (0, 6, vec![]),
            (1, 6, vec![1]),
            (6, 6, vec![6]),
            (7, 6, vec![4, 3]),
            (9, 6, vec![5, 4]),
            (24, 6, vec![6, 6, 6, 6]),
            (5, 1, vec![1, 1, 1, 1, 1]),
            (3, 0, vec![1, 1, 1]),
        ] {
            let groups = cut(n, batch);
            assert_eq!(sizes(&groups), want, "{n} stories, batch {batch}");
            let all: Vec<usize> = groups.iter().flat_map(|g| g.stories.clone()).collect();
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "in order, each once");
        }
    }

    #[test]
    fn a_landing_takes_the_window_of_batches_or_what_waits() {
        for (window, batch, waiting, n) in [
            (4, 1, 10, 4),
            (4, 6, 10, 10),
            (4, 6, 30, 24),
            (1, 6, 30, 6),
            (0, 0, 3, 1),
            (2, 3, 0, 0),
        ] {
            assert_eq!(
                take(window, batch, waiting),
                n,
                "{window} {batch} {waiting}"
            );
        }
    }

    #[test]
    fn groups_form_a_chain_and_a_group_to_split_is_halved_side_by_side() {
        // (plan, room) -> (candidates as (stories, on_tip), what waits)
        type Case = (Vec<Group>, usize, Vec<(Vec<usize>, bool)>, Vec<Group>);
        let cases: Vec<Case> = vec![
            (
                vec![g(&[0, 1]), g(&[2, 3]), g(&[4])],
                4,
                vec![(vec![0, 1], true), (vec![2, 3], false), (vec![4], false)],
                vec![],
            ),
            // No more candidates than room.
            (
                vec![g(&[0]), g(&[1]), g(&[2])],
                2,
                vec![(vec![0], true), (vec![1], false)],
                vec![g(&[2])],
            ),
            // A group to split: its halves, each on the tip.
            (
                vec![split(&[0, 1, 2, 3, 4]), g(&[5])],
                4,
                vec![(vec![0, 1], true), (vec![2, 3, 4], true)],
                vec![g(&[5])],
            ),
            // No room beside: the first half alone, the second waits.
            (
                vec![split(&[0, 1, 2])],
                1,
                vec![(vec![0], true)],
                vec![g(&[1, 2])],
            ),
            // A chain stops before a group to split.
            (
                vec![g(&[0]), split(&[1, 2])],
                4,
                vec![(vec![0], true)],
                vec![split(&[1, 2])],
            ),
            (vec![], 4, vec![], vec![]),
        ];
        for (plan, room, want, rest) in cases {
            let (cands, left) = layout(&plan, room);
            let got: Vec<(Vec<usize>, bool)> =
                cands.into_iter().map(|c| (c.stories, c.on_tip)).collect();
            assert_eq!(got, want, "{plan:?} room {room}");
            assert_eq!(left, rest, "{plan:?} room {room}");
        }
    }

    fn chain(groups: &[&[usize]]) -> Vec<Cand> {
        groups
            .iter()
            .enumerate()
            .map(|(i, s)| Cand {
                stories: s.to_vec(),
                on_tip: i == 0,
            })
            .collect()
    }

    fn pair(l: &[usize], r: &[usize]) -> Vec<Cand> {
        vec![
            Cand {
                stories: l.to_vec(),
                on_tip: true,
            },
            Cand {
                stories: r.to_vec(),
                on_tip: true,
            },
        ]
    }

    #[test]
    fn a_chain_lands_its_passed_prefix_and_splits_the_first_failed_batch() {
        let c = chain(&[&[0, 1], &[2, 3, 4], &[5, 6]]);
        let d = decide(&c, &[Passed, Failed, Thrown], vec![g(&[7])]);
        assert_eq!(d.land, vec![0]);
        assert_eq!(d.plan, vec![split(&[2, 3, 4]), g(&[7])], "7 was not built");
        assert_eq!(d.behind, vec![5, 6], "built on the failure: back");
        assert!(d.culprits.is_empty() && d.stopped.is_none());
        // A story alone that failed is the one blamed.
        let c = chain(&[&[0, 1], &[2], &[3]]);
        let d = decide(&c, &[Passed, Failed, Thrown], vec![]);
        assert_eq!((d.land, d.culprits, d.behind), (vec![0], vec![1], vec![3]));
        assert!(d.plan.is_empty());
        // All passed: everything lands, what waited is next.
        let d = decide(&c, &[Passed, Passed, Passed], vec![g(&[4])]);
        assert_eq!((d.land, d.plan), (vec![0, 1, 2], vec![g(&[4])]));
        // A validation that could not run: its first story says why.
        let c = chain(&[&[0, 1], &[2, 3]]);
        let d = decide(&c, &[Passed, Stopped], vec![]);
        assert_eq!((d.land, d.stopped, d.behind), (vec![0], Some(1), vec![3]));
    }

    #[test]
    fn a_bisection_lands_the_half_that_passed_and_splits_the_half_that_failed() {
        // (halves' verdicts) -> (land, culprits, plan)
        type Case = ([Verdict; 2], Vec<usize>, Vec<usize>, Vec<Group>);
        let l: &[usize] = &[0, 1, 2];
        let cases: Vec<Case> = vec![
            ([Passed, Failed], vec![0], vec![], vec![split(&[3, 4])]),
            ([Failed, Passed], vec![1], vec![], vec![split(l)]),
            (
                [Failed, Failed],
                vec![],
                vec![],
                vec![split(l), split(&[3, 4])],
            ),
            // Each half passes on the tip, together they failed: the
            // second is validated again on the first.
            ([Passed, Passed], vec![0], vec![], vec![g(&[3, 4])]),
        ];
        for (v, land, culprits, plan) in cases {
            let d = decide(&pair(l, &[3, 4]), &v, vec![g(&[9])]);
            let mut want = plan.clone();
            want.push(g(&[9]));
            assert_eq!(
                (d.land, d.culprits, d.plan),
                (land, culprits, want),
                "{v:?}"
            );
            assert!(d.behind.is_empty() && d.stopped.is_none());
        }
        // Halves of one story each: the failed one is blamed.
        let d = decide(&pair(&[0], &[1]), &[Passed, Failed], vec![]);
        assert_eq!((d.land, d.culprits), (vec![0], vec![1]));
        let d = decide(&pair(&[0], &[1]), &[Failed, Failed], vec![]);
        assert_eq!((d.land, d.culprits), (vec![], vec![0, 1]));
        // A half that could not be validated ends the landing.
        let d = decide(&pair(&[0, 1], &[2, 3]), &[Stopped, Passed], vec![g(&[4])]);
        assert_eq!((d.land, d.stopped), (vec![1], Some(0)));
        assert_eq!(d.behind, vec![1, 4]);
        assert!(d.plan.is_empty());
    }

    #[test]
    fn a_bisection_finds_the_one_bad_story_among_six_and_lands_the_rest() {
        // The whole loop as run/queue.rs runs it, with story `bad` breaking
        // every tree that holds it, side by side or one at a time.
        for (bad, room) in [(4, 2), (4, 1), (0, 2), (5, 4), (2, 1)] {
            let mut plan = vec![split(&[0, 1, 2, 3, 4, 5])];
            let (mut landed, mut blamed, mut runs) = (Vec::new(), Vec::new(), 0);
            for _ in 0..10 {
                if plan.is_empty() {
                    break;
                }
                let (cands, rest) = layout(&plan, room);
                assert!(cands.len() <= room);
                let verdicts: Vec<Verdict> = cands
                    .iter()
                    .map(|c| {
                        if c.stories.contains(&bad) {
                            Failed
                        } else {
                            Passed
                        }
                    })
                    .collect();
                runs += cands.len();
                let d = decide(&cands, &verdicts, rest);
                for &c in &d.land {
                    landed.extend(cands[c].stories.clone());
                }
                for &c in &d.culprits {
                    blamed.extend(cands[c].stories.clone());
                }
                assert!(d.behind.is_empty());
                plan = d.plan;
            }
            assert!(plan.is_empty(), "bad {bad}, room {room}: {plan:?}");
            landed.sort();
            let others: Vec<usize> = (0..6).filter(|&s| s != bad).collect();
            assert_eq!(landed, others, "bad {bad}, room {room}");
            assert_eq!(blamed, vec![bad], "bad {bad}, room {room}");
            assert!(runs <= 6, "{runs} validations to find one story in six");
        }
    }

    #[test]
    fn what_a_failure_throws_away_and_what_a_tree_holds() {
        let c = chain(&[&[0, 1], &[2], &[3, 4]]);
        assert_eq!(built_on(&c, 0), vec![1, 2]);
        assert_eq!(holds(&c, 2), vec![0, 1, 2, 3, 4]);
        let p = pair(&[0, 1], &[2]);
        assert!(built_on(&p, 0).is_empty());
        assert_eq!(holds(&p, 1), vec![2]);
    }

    #[test]
    fn room_is_one_per_cpu_and_no_more_than_memory_holds_unless_set() {
        let m = |cpus, available_mb, per_validation_mb| Machine {
            cpus,
            available_mb,
            per_validation_mb,
        };
        // (max_validations, machine) -> room
        for (max, machine, want) in [
            (0, m(8, None, 1024), 8),
            (3, m(8, Some(512), 1024), 3),
            (0, m(0, None, 1024), 1),
            (0, m(8, Some(3000), 1024), 2),
            (0, m(8, Some(100), 1024), 1),
            (0, m(2, Some(64_000), 1024), 2),
            (0, m(8, Some(100), 0), 8),
        ] {
            assert_eq!(room(max, machine), want, "{max} {machine:?}");
        }
    }
}
