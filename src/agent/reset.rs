//! When a usage limit resets, from the words and fields every agent CLI
//! uses to say so ("resets 5pm (UTC)", "try again at 3:51 PM", "Try again in
//! 4 days 20 hours 9 minutes", `resetsAt`, ...). Pure: the caller passes the
//! clock and the local UTC offset.
//!
//! Forms are tried in tiers, most exact first (agents.md §6.3): a structured
//! field, the epoch after `|`, a stated duration, then a clock time or date.
//! The first tier that names a time decides, and within a tier the first
//! occurrence in the text: a later, vaguer form must not overrule an epoch,
//! and a stale field must not fall through to a clock text that would be read
//! as "tomorrow".
//!
//! The text is matched on ASCII-lowercased bytes, never sliced as `str`, so
//! no input can hit a char boundary; all arithmetic on `now` is checked.

const MINUTE: i64 = 60;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;

/// Clock texts are cut to the minute (Claude printed "resets 2:04pm" for a
/// `resetsAt` of 14:04:37) and reach ralph some seconds after they were
/// written. A named time this little in the past is the reset happening now,
/// not tomorrow's and not a stale message.
const GRACE: i64 = 10 * MINUTE;

/// The longest known limit window is a month (Cursor). A reset further ahead
/// than this is a misread number, and waiting on it would stall the run.
const MAX_AHEAD: i64 = 400 * DAY;

/// Field names whose value is the reset as a Unix time. Matched as whole
/// names, so `overageResetsAt` (when paid overage resets) is not taken.
const EPOCH_FIELDS: &[&[u8]] = &[b"resetsat", b"resets_at", b"resetat", b"reset_at"];
/// Field names whose value is the wait: seconds, or a Go-style duration
/// (Gemini's `quotaResetDelay: "2h13m5s"`, `retryDelay: "7985s"`).
const SECONDS_FIELDS: &[&[u8]] = &[b"resets_in_seconds", b"reset_in_seconds"];
const DURATION_FIELDS: &[&[u8]] = &[b"quotaresetdelay", b"retrydelay"];

/// Phrases after which the limit itself states how long it lasts.
const QUOTA_DURATIONS: &[&[u8]] = &[
    b"reset after",
    b"resets after",
    b"reset in",
    b"resets in",
    b"refresh in",
    b"refreshes in",
    b"try again in",
];
/// A client's own retry delay: it follows the quota's reset when both are
/// given (Gemini prints "reset after 2h13m5s.. Retrying after 8587399ms"), so
/// it ranks below the stated reset.
const RETRY_DURATIONS: &[&[u8]] = &[b"retrying after", b"retry after", b"retry in"];
/// Phrases followed by a clock time, a date, or both.
const CLOCK_PHRASES: &[&[u8]] = &[b"resets", b"reset", b"again at"];

/// The reset time (Unix seconds) a limit message names, if it names one.
/// `now` is the current Unix time; `local_offset_secs` the machine's UTC
/// offset, for times given without a zone.
///
/// A named absolute time more than [`GRACE`] in the past gives `None`, not
/// that time: the message is stale or misread, and resuming at once would
/// only hit the limit again, while `None` lets the caller back off. A clock
/// time without a date is the next such time, or today's if it passed less
/// than [`GRACE`] ago.
pub(crate) fn reset_time(text: &str, now: i64, local_offset_secs: i32) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    let s = lower.as_bytes();
    let local = i64::from(local_offset_secs);
    let at = first_field(s, now)
        .or_else(|| pipe_epoch(s))
        .or_else(|| after_phrase(s, QUOTA_DURATIONS, |_, c| duration(c, now)))
        .or_else(|| after_phrase(s, RETRY_DURATIONS, |_, c| duration(c, now)))
        .or_else(|| after_phrase(s, CLOCK_PHRASES, |_, c| when(c, now, local)))?;
    let plausible = now.saturating_sub(GRACE)..=now.saturating_add(MAX_AHEAD);
    plausible.contains(&at).then_some(at)
}

/// A byte that continues a word or a field name.
fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Runs `parse` (given the phrase) after every whole-word occurrence of any
/// of `phrases`, in text order, and returns the first success.
fn after_phrase(
    s: &[u8],
    phrases: &[&[u8]],
    mut parse: impl FnMut(&[u8], &mut Cursor<'_>) -> Option<i64>,
) -> Option<i64> {
    (0..s.len()).find_map(|i| {
        if i > 0 && is_word(s[i - 1]) {
            return None;
        }
        phrases.iter().find_map(|p| {
            let end = i + p.len();
            let whole = s[i..].starts_with(p) && !s.get(end).is_some_and(|&b| is_word(b));
            if !whole {
                return None;
            }
            parse(p, &mut Cursor { s, pos: end })
        })
    })
}

/// `"resetsAt":1795356277`, `resets_at = 1795356277123`,
/// `"resets_in_seconds": 7200`, `"quotaResetDelay": "2h13m5s"`: the first such
/// field in the text.
fn first_field(s: &[u8], now: i64) -> Option<i64> {
    let fields: Vec<&[u8]> = EPOCH_FIELDS
        .iter()
        .chain(SECONDS_FIELDS)
        .chain(DURATION_FIELDS)
        .copied()
        .collect();
    after_phrase(s, &fields, |name, c| {
        c.quote();
        c.spaces();
        if !(c.eat(b":") || c.eat(b"=")) {
            return None;
        }
        c.spaces();
        c.quote();
        if EPOCH_FIELDS.contains(&name) {
            let (v, _) = c.digits()?;
            epoch(v)
        } else if SECONDS_FIELDS.contains(&name) {
            let (v, _) = c.digits()?;
            now.checked_add(i64::try_from(v).ok()?)
        } else {
            duration(c, now)
        }
    })
}

/// Claude Code 1.0's `Claude AI usage limit reached|1755615600`. At least
/// nine digits, so a `|` in a table or a pipeline is not read as a time.
fn pipe_epoch(s: &[u8]) -> Option<i64> {
    s.iter().enumerate().find_map(|(i, &b)| {
        if b != b'|' {
            return None;
        }
        let mut c = Cursor { s, pos: i + 1 };
        let (v, n) = c.digits()?;
        if n < 9 || c.peek().is_some_and(is_word) {
            return None;
        }
        epoch(v)
    })
}

/// Unix seconds, or milliseconds when the number is too big to be seconds
/// of this era. Milliseconds round up so the wait never ends early.
fn epoch(v: u64) -> Option<i64> {
    let secs = if v > 1_000_000_000_000 {
        v.div_ceil(1000)
    } else {
        v
    };
    i64::try_from(secs).ok()
}

/// "4 days 20 hours 9 minutes", "6 days and 18 hours", "2h13m5s", "1500ms",
/// "1.5s": `now` plus their sum, rounded up to whole seconds.
fn duration(c: &mut Cursor<'_>, now: i64) -> Option<i64> {
    c.spaces();
    let mut total_ms: i128 = 0;
    let mut parts = 0;
    loop {
        let start = c.pos;
        if parts > 0 {
            c.separators();
        }
        match c.attempt(Cursor::duration_part) {
            Some(ms) => {
                total_ms = total_ms.checked_add(ms)?;
                parts += 1;
            }
            None => {
                c.pos = start;
                break;
            }
        }
    }
    if parts == 0 {
        return None;
    }
    let secs = i64::try_from(total_ms.checked_add(999)? / 1000).ok()?;
    now.checked_add(secs)
}

fn unit_ms(word: &[u8]) -> Option<i128> {
    Some(match word {
        b"ms" | b"msec" | b"msecs" | b"millisecond" | b"milliseconds" => 1,
        b"s" | b"sec" | b"secs" | b"second" | b"seconds" => 1000,
        b"m" | b"min" | b"mins" | b"minute" | b"minutes" => 60_000,
        b"h" | b"hr" | b"hrs" | b"hour" | b"hours" => 3_600_000,
        b"d" | b"day" | b"days" => 86_400_000,
        b"w" | b"week" | b"weeks" => 604_800_000,
        _ => return None,
    })
}

/// A clock time, a date, or a date and a time, after "resets", "reset at",
/// "try again at": "5pm (UTC)", "3:51 PM", "Feb 23rd, 2026 9:01 PM",
/// "Jan 12, 10:59am (America/New_York)", "Sep 15 at 7pm", "14:30".
fn when(c: &mut Cursor<'_>, now: i64, local: i64) -> Option<i64> {
    c.spaces();
    if c.eat_word(b"at") || c.eat_word(b"on") {
        c.spaces();
    }
    let date = c.attempt(Cursor::date);
    if date.is_some() {
        c.spaces();
        c.eat(b",");
        c.spaces();
        if c.eat_word(b"at") {
            c.spaces();
        }
    }
    let clock = c.attempt(Cursor::clock);
    // A date followed by a number that is not a valid time ("Jan 12, 10:99am")
    // is a misread, not midnight.
    if clock.is_none() && (date.is_none() || c.peek().is_some_and(|b| b.is_ascii_digit())) {
        return None;
    }
    let offset = c.attempt(Cursor::utc_zone).unwrap_or(local);
    let secs = clock.unwrap_or(0);
    match date {
        None => {
            let today = now.checked_add(offset)?.div_euclid(DAY);
            let t = today
                .checked_mul(DAY)?
                .checked_add(secs)?
                .checked_sub(offset)?;
            if t < now.checked_sub(GRACE)? {
                t.checked_add(DAY)
            } else {
                Some(t)
            }
        }
        Some((Some(year), month, day)) => instant(year, month, day, secs, offset),
        // Without a year, the one nearest to now: "Jan 12" in December is next
        // year's, "Sep 15" in November this year's (and so past).
        Some((None, month, day)) => {
            let this = year_of_days(now.checked_add(offset)?.div_euclid(DAY));
            [this - 1, this, this + 1]
                .into_iter()
                .filter_map(|y| instant(y, month, day, secs, offset))
                .min_by_key(|t| t.abs_diff(now))
        }
    }
}

/// Unix time of a wall-clock time at UTC offset `offset`; `None` for a day
/// the month does not have ("Feb 30th").
fn instant(year: i64, month: u32, day: u32, secs: i64, offset: i64) -> Option<i64> {
    if day == 0 || day > days_in_month(year, month)? {
        return None;
    }
    days_from_civil(year, month, day)
        .checked_mul(DAY)?
        .checked_add(secs)?
        .checked_sub(offset)
}

fn is_leap(year: i64) -> bool {
    year.rem_euclid(4) == 0 && (year.rem_euclid(100) != 0 || year.rem_euclid(400) == 0)
}

fn days_in_month(year: i64, month: u32) -> Option<u32> {
    Some(match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => return None,
    })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`: eras of 400 years starting in March, so the leap day
/// is the last day of its year).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The year of a day counted from 1970-01-01 (the inverse of
/// [`days_from_civil`], year only).
fn year_of_days(days: i64) -> i64 {
    let z = days.saturating_add(719_468);
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    era.saturating_mul(400)
        .saturating_add(yoe)
        .saturating_add(i64::from(mp >= 10))
}

fn month_number(word: &[u8]) -> Option<u32> {
    const NAMES: [&[u8]; 12] = [
        b"january",
        b"february",
        b"march",
        b"april",
        b"may",
        b"june",
        b"july",
        b"august",
        b"september",
        b"october",
        b"november",
        b"december",
    ];
    if word.len() < 3 {
        return None;
    }
    let i = NAMES.iter().position(|n| n.starts_with(word))?;
    u32::try_from(i + 1).ok()
}

/// The offset of a zone name that needs no tz database ("UTC", "GMT",
/// "UTC+2", "Etc/GMT-1"); `None` for any other.
fn utc_offset(name: &[u8]) -> Option<i64> {
    let (etc, rest) = match name.strip_prefix(b"etc/") {
        Some(rest) => (true, rest),
        None => (false, name),
    };
    if matches!(rest, b"z" | b"zulu" | b"universal") {
        return Some(0);
    }
    let rest = rest
        .strip_prefix(b"utc")
        .or_else(|| rest.strip_prefix(b"gmt"))?;
    if rest.is_empty() {
        return Some(0);
    }
    let mut c = Cursor { s: rest, pos: 0 };
    let sign = if c.eat(b"+") {
        1
    } else if c.eat(b"-") {
        -1
    } else {
        return None;
    };
    let (h, hd) = c.digits()?;
    let mut m = 0;
    if c.eat(b":") {
        let (mm, md) = c.digits()?;
        if md != 2 {
            return None;
        }
        m = mm;
    }
    if hd > 2 || h > 14 || m > 59 || c.peek().is_some() {
        return None;
    }
    // POSIX-style Etc/GMT+5 is five hours *behind* UTC.
    let sign = if etc { -sign } else { sign };
    Some(sign * (i64::try_from(h).ok()? * HOUR + i64::try_from(m).ok()? * MINUTE))
}

/// A position in the lowercased text. Every parser that fails may leave
/// `pos` anywhere; `attempt` puts it back.
struct Cursor<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn attempt<T>(&mut self, parse: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        let start = self.pos;
        let found = parse(self);
        if found.is_none() {
            self.pos = start;
        }
        found
    }

    fn eat(&mut self, lit: &[u8]) -> bool {
        let hit = self.s.get(self.pos..).is_some_and(|r| r.starts_with(lit));
        if hit {
            self.pos += lit.len();
        }
        hit
    }

    /// An optional quote around a field name or value.
    fn quote(&mut self) {
        if !self.eat(b"\"") {
            self.eat(b"'");
        }
    }

    /// `lit` as a whole word: "at" but not the start of "attempt".
    fn eat_word(&mut self, lit: &[u8]) -> bool {
        let start = self.pos;
        if self.eat(lit) && !self.peek().is_some_and(is_word) {
            return true;
        }
        self.pos = start;
        false
    }

    /// Spaces, tabs, and the no-break spaces that localised time formats put
    /// before "PM" (U+00A0, U+202F).
    fn spaces(&mut self) {
        while self.eat(b" ")
            || self.eat(b"\t")
            || self.eat("\u{a0}".as_bytes())
            || self.eat("\u{202f}".as_bytes())
        {}
    }

    fn word(&mut self) -> &'a [u8] {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_alphabetic()) {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    /// A run of digits: its value and length. `None` for no digit or a
    /// value that does not fit (the digits are consumed either way).
    fn digits(&mut self) -> Option<(u64, usize)> {
        let start = self.pos;
        let mut value: Option<u64> = Some(0);
        while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
            value = value
                .and_then(|v| v.checked_mul(10))
                .and_then(|v| v.checked_add(u64::from(d - b'0')));
            self.pos += 1;
        }
        let n = self.pos - start;
        if n == 0 {
            return None;
        }
        Some((value?, n))
    }

    /// What may join the parts of a duration: spaces, commas, "and".
    fn separators(&mut self) {
        loop {
            self.spaces();
            if !(self.eat(b",") || self.eat_word(b"and")) {
                return;
            }
        }
    }

    /// "20 hours", "13m", "1.5s": milliseconds.
    fn duration_part(&mut self) -> Option<i128> {
        let (int, _) = self.digits()?;
        let (mut frac, mut scale) = (0_i128, 1_i128);
        if self.peek() == Some(b'.') && self.s.get(self.pos + 1).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
            while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
                // Digits past a nanosecond cannot change a whole-second wait.
                if scale < 1_000_000_000 {
                    frac = frac * 10 + i128::from(d - b'0');
                    scale *= 10;
                }
                self.pos += 1;
            }
        }
        self.spaces();
        let unit = unit_ms(self.word())?;
        i128::from(int)
            .checked_mul(unit)?
            .checked_add(frac.checked_mul(unit)? / scale)
    }

    /// "5pm", "2:04pm", "3:51 PM", "12 a.m.", "14:30": seconds after midnight.
    fn clock(&mut self) -> Option<i64> {
        let (h, hd) = self.digits()?;
        let (mut m, mut sec, mut has_minutes) = (0, 0, false);
        if self.eat(b":") {
            let (mm, md) = self.digits()?;
            (m, has_minutes) = (mm, md == 2);
            if !has_minutes {
                return None;
            }
            if self.eat(b":") {
                let (ss, sd) = self.digits()?;
                if sd != 2 {
                    return None;
                }
                sec = ss;
            }
        }
        let before = self.pos;
        self.spaces();
        let pm = if self.eat_word(b"am") || self.eat(b"a.m.") {
            Some(false)
        } else if self.eat_word(b"pm") || self.eat(b"p.m.") {
            Some(true)
        } else {
            self.pos = before;
            None
        };
        if hd > 2 || m > 59 || sec > 59 || self.peek().is_some_and(is_word) {
            return None;
        }
        let hour = match pm {
            // 12 AM is midnight, 12 PM noon.
            Some(pm) if (1..=12).contains(&h) => h % 12 + if pm { 12 } else { 0 },
            Some(_) => return None,
            // Without AM/PM only a 24-hour "HH:MM" is a time; a bare number
            // is a count or a day.
            None if has_minutes && h <= 23 => h,
            None => return None,
        };
        i64::try_from(hour * 3600 + m * 60 + sec).ok()
    }

    /// "Feb 23rd, 2026", "Jan 12", "September 15": (year if given, month, day).
    fn date(&mut self) -> Option<(Option<i64>, u32, u32)> {
        let month = month_number(self.word())?;
        self.spaces();
        let (day, dd) = self.digits()?;
        if dd > 2 {
            return None;
        }
        let after_day = self.pos;
        if !matches!(self.word(), b"st" | b"nd" | b"rd" | b"th") {
            self.pos = after_day;
        }
        if self.peek().is_some_and(is_word) {
            return None;
        }
        let year = self.attempt(|c| {
            c.eat(b",");
            c.spaces();
            let (y, n) = c.digits()?;
            // Four digits then ':' is a 24-hour time, not a year.
            (n == 4 && c.peek() != Some(b':')).then(|| i64::try_from(y).ok())?
        });
        Some((year, month, u32::try_from(day).ok()?))
    }

    /// " (UTC)", " UTC", " (GMT+2)": the zone's offset when it has a fixed
    /// one. Any other name ("(Europe/Berlin)", "(Asia/Tokyo)") is read as
    /// local time: without a tz database ralph cannot know its offset or
    /// DST, and the agent names the zone it runs in, which is this machine's
    /// unless its TZ differs from ralph's.
    fn utc_zone(&mut self) -> Option<i64> {
        self.spaces();
        if self.eat(b"(") {
            let rest = self.s.get(self.pos..)?;
            let close = rest.iter().take(64).position(|&b| b == b')')?;
            let name = rest.get(..close)?.trim_ascii();
            self.pos += close + 1;
            return utc_offset(name);
        }
        let start = self.pos;
        let zone = self.word();
        if !matches!(zone, b"utc" | b"gmt") {
            return None;
        }
        while self
            .peek()
            .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b':'))
        {
            self.pos += 1;
        }
        utc_offset(self.s.get(start..self.pos)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sunday 2026-11-22 12:48:14 UTC. Local wall clock: 12:48 at offset 0,
    /// 13:48 at +1 h, 07:48 at −5 h. Expected values below were computed with
    /// Python's `datetime`, not with this file's calendar code.
    const NOW: i64 = 1_795_351_694;
    const CET: i32 = 3600;
    const EST: i32 = -18000;

    /// (text, local offset, expected reset). Every form with an example from
    /// a recording, the notes or an issue thread.
    const TABLE: &[(&str, i32, Option<i64>)] = &[
        // Claude Code: a clock time in a named zone; UTC needs no local offset.
        ("You've hit your session limit · resets 2:04pm (UTC)", 0, Some(1_795_356_240)),
        ("You've hit your session limit · resets 2:04pm (UTC)", CET, Some(1_795_356_240)),
        ("You've hit your session limit · resets 2:04pm (UTC)", EST, Some(1_795_356_240)),
        ("resets 5pm (UTC)", EST, Some(1_795_366_800)),
        ("resets 5pm UTC", CET, Some(1_795_366_800)),
        ("resets 5pm (UTC+2)", 0, Some(1_795_359_600)),
        ("resets 5pm (Etc/GMT+5)", 0, Some(1_795_384_800)),
        // A zone without a fixed offset is read as local time.
        ("resets 5pm (Europe/Berlin)", 0, Some(1_795_366_800)),
        ("resets 5pm (Europe/Berlin)", CET, Some(1_795_363_200)),
        ("resets 5pm (Europe/Berlin)", EST, Some(1_795_384_800)),
        ("You've hit your session limit · resets 3:50pm (Asia/Tokyo)", CET, Some(1_795_359_000)),
        (
            "Claude usage limit reached. Your limit will reset at 5pm (Europe/Warsaw).",
            0,
            Some(1_795_366_800),
        ),
        // No zone at all: local. 1pm is past at +1 h (13:48), so tomorrow's.
        ("5-hour limit reached ∙ resets 1pm", 0, Some(1_795_352_400)),
        ("5-hour limit reached ∙ resets 1pm", CET, Some(1_795_435_200)),
        ("5-hour limit reached ∙ resets 1pm", EST, Some(1_795_370_400)),
        // 12 PM is noon, 12 AM midnight; noon has passed at 0 and +1 h.
        ("resets 12pm (UTC)", 0, Some(1_795_435_200)),
        ("resets 12pm", CET, Some(1_795_431_600)),
        ("resets 12pm", EST, Some(1_795_366_800)),
        ("resets 12am (UTC)", CET, Some(1_795_392_000)),
        ("resets 12am", EST, Some(1_795_410_000)),
        // /usage: the date is shown when the reset is not today; no year.
        ("You've hit your weekly limit · resets Dec 1 at 7pm", 0, Some(1_796_151_600)),
        ("Resets Jan 12, 10:59am (America/New_York)", EST, Some(1_799_769_540)),
        ("Resets 7:59am (America/New_York)", EST, Some(1_795_352_340)),
        // A date without a year that has passed this year: stale, not next year.
        ("You've hit your weekly limit · resets Sep 15 at 7pm", 0, None),
        // Claude Code 1.0: the epoch after '|'. The brief's 2026-01-01 is past.
        ("Claude AI usage limit reached|1795356277", EST, Some(1_795_356_277)),
        ("Claude AI usage limit reached|1767225600", 0, None),
        // A short number after '|' is a table cell, not an epoch.
        ("usage|42|resets 5pm (UTC)", 0, Some(1_795_366_800)),
        // Fields: seconds, milliseconds (rounded up), a wait, a Go duration.
        (
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795356277,"rateLimitType":"five_hour"}}"#,
            CET,
            Some(1_795_356_277),
        ),
        (r#"{"resets_at": 1795356277123}"#, 0, Some(1_795_356_278)),
        (r#"{"resets_at":1767225600}"#, 0, None),
        (r#"{"plan_type":"plus","resets_in_seconds":7200}"#, 0, Some(1_795_358_894)),
        (r#""quotaResetDelay": "2h13m5s""#, 0, Some(1_795_359_679)),
        // Overage has its own clock; it is not when the limit lifts.
        (r#"{"overageResetsAt":1795356277}"#, 0, None),
        // Codex: local clock time, the next one after now.
        ("You’ve hit your usage limit. ... or try again at 2:28 PM.", 0, Some(1_795_357_680)),
        ("You’ve hit your usage limit. ... or try again at 2:28 PM.", CET, Some(1_795_354_080)),
        ("You’ve hit your usage limit. ... or try again at 2:28 PM.", EST, Some(1_795_375_680)),
        ("try again at 3:51\u{202f}PM.", 0, Some(1_795_352_400 + 10_260)),
        ("try again at 12:30 AM.", 0, Some(1_795_393_800)),
        ("try again at 12:05 PM.", 0, Some(1_795_435_500)),
        // Just past, within GRACE: the reset happening now, not tomorrow's.
        ("try again at 12:45 PM.", 0, Some(1_795_351_500)),
        ("try again at 14:30", 0, Some(1_795_357_800)),
        ("try again at Dec 23rd, 2026 9:01 PM.", 0, Some(1_798_059_660)),
        ("try again at Dec 23rd, 2026 9:01 PM.", CET, Some(1_798_056_060)),
        ("try again at Dec 23rd, 2026 9:01 PM.", EST, Some(1_798_077_660)),
        // An absolute date already past: the message is stale or misread;
        // resuming at once would just hit the limit again, `None` backs off.
        ("try again at Feb 23rd, 2026 9:01 PM.", 0, None),
        // Durations.
        ("Try again in 4 days 20 hours 9 minutes.", CET, Some(1_795_769_834)),
        ("Model quota limit exceeded. Refreshes in 6 days and 18 hours", 0, Some(1_795_934_894)),
        ("reset after 1h2m3s", 0, Some(1_795_355_417)),
        ("Your quota will reset after 2h", EST, Some(1_795_358_894)),
        ("Retrying after 1500ms", 0, Some(1_795_351_696)),
        ("Please try again in 1.5s.", 0, Some(1_795_351_696)),
        // The quota's own reset outranks the client's retry delay beside it.
        (
            "Attempt 1 failed: You have exhausted your capacity on this model. Your quota will reset after 2h13m5s.. Retrying after 8587399ms...",
            0,
            Some(1_795_359_679),
        ),
        ("[API Error: Quota exceeded ...\nSuggested retry after 1s.]\nPlease wait and try again later.", 0, Some(1_795_351_695)),
        // Case does not matter.
        ("RESETS 5PM (utc)", CET, Some(1_795_366_800)),
        ("TRY AGAIN IN 2 HOURS", 0, Some(1_795_358_894)),
        // No time named.
        ("Try again later.", 0, None),
        ("Error: Amp server returned an error. Try again in a moment.", 0, None),
        ("You're out of usage credits", 0, None),
        ("", 0, None),
    ];

    #[test]
    fn every_form_in_the_table() {
        let mut wrong = Vec::new();
        for &(text, offset, want) in TABLE {
            let got = reset_time(text, NOW, offset);
            if got != want {
                wrong.push(format!(
                    "{text:?} at {offset:+}: got {got:?}, want {want:?}"
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// A structured field is exact; the clock text beside it is cut to the
    /// minute ("2:04pm" for 14:04:37), so the field must win wherever it is.
    #[test]
    fn a_field_outranks_the_clock_text_beside_it() {
        let text = r#"You've hit your session limit · resets 2:04pm (UTC) {"resetsAt":1795356277}"#;
        assert_eq!(reset_time(text, NOW, 0), Some(1_795_356_277));
    }

    #[test]
    fn dates_cross_the_year_and_know_leap_days() {
        let dec_30 = 1_798_632_000; // 2026-12-30 12:00 UTC
        assert_eq!(
            reset_time("resets Jan 2 at 9am (UTC)", dec_30, 0),
            Some(1_798_880_400)
        );
        let new_years_eve = 1_798_761_000; // 2026-12-31 23:50 UTC
        assert_eq!(
            reset_time("try again at 12:30 AM", new_years_eve, 0),
            Some(1_798_763_400)
        );
        let feb_2028 = 1_832_976_000; // 2028-02-01 00:00 UTC
        assert_eq!(
            reset_time("resets Feb 29 at 9am (UTC)", feb_2028, 0),
            Some(1_835_427_600)
        );
        assert_eq!(reset_time("resets Feb 29th, 2027 9am (UTC)", NOW, 0), None);
        // Century years are leap only every 400 years.
        for (year, days) in [(1900, 28), (2000, 29), (2027, 28), (2028, 29), (2100, 28)] {
            assert_eq!(days_in_month(year, 2), Some(days), "February {year}");
        }
    }

    #[test]
    fn calendar_matches_known_days() {
        // (year, month, day, days since 1970-01-01), from Python.
        let known = [
            (1970, 1, 1, 0),
            (2000, 3, 1, 11_017),
            (1900, 3, 1, -25_508),
            (1600, 2, 29, -135_081),
            (2026, 11, 22, 20_779),
            (2028, 2, 29, 21_243),
        ];
        for (y, m, d, days) in known {
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
            assert_eq!(year_of_days(days), y, "year of day {days}");
        }
        // The year changes exactly between Dec 31 and Jan 1, in every era.
        for y in [-401, -1, 0, 1, 1899, 1900, 1969, 1970, 2000, 2100, 9999] {
            let jan_1 = days_from_civil(y, 1, 1);
            assert_eq!(year_of_days(jan_1), y);
            assert_eq!(year_of_days(jan_1 - 1), y - 1);
            assert_eq!(
                days_from_civil(y, 12, 31) - jan_1 + 1,
                if is_leap(y) { 366 } else { 365 }
            );
        }
    }

    #[test]
    fn odd_input_never_panics_and_never_names_an_implausible_time() {
        let texts = [
            "",
            "resets",
            "resets ",
            "reset at",
            "try again at",
            "resets 99:99 PM",
            "try again at 99:99 PM",
            "resets 13pm",
            "resets 0am",
            "resets 24:00",
            "resets 5:7pm",
            "try again at Feb 30th, 2026 9:01 PM",
            "try again at Feb 30th",
            "resets Jan 12, 10:99am",
            "resets Feb 2026",
            "|",
            "|99999999999999999999999999",
            "limit reached|18446744073709551615",
            "limit reached|9223372036854775807",
            r#""resetsAt":99999999999999999999"#,
            r#""resets_at": 18446744073709551615"#,
            r#""resetsAt":"#,
            r#""resets_in_seconds": 9223372036854775807"#,
            "Try again in 99999999999999999999 days",
            "try again in 18446744073709551615 weeks",
            "reset after 9223372036854775807s",
            "reset after 1.99999999999999999999999999s",
            "resets 5pm (",
            "resets 5pm (UTC+99)",
            "resets 5pm (utc+5:99)",
            "resets 5pm utc+",
            "résets 5pm · ünïcödé ∙ resets 5\u{202f}",
            "\u{202f}\u{a0}\u{202f}",
            "resets\u{0}5pm",
            "Retrying after ms",
            "try again in 1.s",
        ];
        let clocks = [0, NOW, -NOW, i64::MIN, i64::MIN + 1, i64::MAX, i64::MAX - 1];
        let offsets = [0, CET, EST, i32::MIN, i32::MAX];
        for text in texts {
            for now in clocks {
                for offset in offsets {
                    if let Some(t) = reset_time(text, now, offset) {
                        assert!(
                            t >= now.saturating_sub(GRACE) && t <= now.saturating_add(MAX_AHEAD),
                            "{text:?} at {now} {offset:+}: {t}"
                        );
                    }
                }
            }
        }
        for text in [
            "resets 99:99 PM",
            "try again at Feb 30th, 2026 9:01 PM",
            "resets 13pm",
        ] {
            assert_eq!(reset_time(text, NOW, 0), None, "{text:?}");
        }
    }

    /// The limit texts of the CLIs (`tests/fixtures/agents/`), read whole:
    /// the one time each names.
    #[test]
    fn recorded_limit_messages() {
        // The recordings' limits end at 2026-11-28 09:00 UTC; read two
        // hours before.
        const RESETS_AT: i64 = 1_795_856_400;
        let now = RESETS_AT - 2 * 3600;
        let cases = [
            // The rate_limit_event line comes before the "resets 9am" text.
            ("claude/unified-oauth.stdout", Some(RESETS_AT)),
            // "try again at 9:00 AM": the next 9:00 of the clock given.
            ("codex/err-usage_limit.stdout", Some(RESETS_AT)),
            ("codex/human-usage.stderr", Some(RESETS_AT)),
            // "Your quota will reset after 1h40m12s".
            ("gemini/quota-429.stderr", Some(now + 6012)),
            ("claude/unified-apikey.stdout", None),
            ("codex/err-429.stdout", None),
        ];
        for (name, want) in cases {
            let text = crate::testenv::fixture_text(&format!("agents/{name}"));
            assert_eq!(reset_time(&text, now, 0), want, "{name}");
        }
    }
}
