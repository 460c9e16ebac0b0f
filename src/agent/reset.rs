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
/// time without a date is never past: it is the next such time.
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
