//! Timestamps without a date crate: UTC, computed from the epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn parts(secs: i64) -> (i64, u32, u32, i64, i64, i64, i64) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    let weekday = (days + 4).rem_euclid(7); // 1970-01-01 was a Thursday
    (y, m, d, rem / 3600, (rem / 60) % 60, rem % 60, weekday)
}

pub(crate) fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// `2026-11-22T11:51:21Z`
/// The machine's UTC offset (seconds east) at `unix`, from the C library's
/// zone rules (`TZ`, /etc/localtime); 0 when it cannot tell.
pub(crate) fn local_offset_secs(unix: i64) -> i32 {
    let t = unix as libc::time_t;
    // SAFETY: localtime_r writes only into the tm we pass; a zeroed tm is a
    // valid value for it to overwrite.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if ok {
        i32::try_from(tm.tm_gmtoff).unwrap_or(0)
    } else {
        0
    }
}

pub(crate) fn iso(secs: i64) -> String {
    let (y, m, d, hh, mm, ss, _) = parts(secs);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// `2026-11-22T11:51:21.123Z`: the technical log needs sub-second order.
pub(crate) fn iso_now_millis() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let base = iso(d.as_secs() as i64);
    format!("{}.{:03}Z", &base[..base.len() - 1], d.subsec_millis())
}

/// The bash tool's progress.txt stamp: `Sun 22 Nov 2026 11:51:21 UTC`.
pub(crate) fn progress_stamp(secs: i64) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, m, d, hh, mm, ss, wd) = parts(secs);
    format!(
        "{} {d:02} {} {y} {hh:02}:{mm:02}:{ss:02} UTC",
        DAYS[wd as usize],
        MONTHS[m as usize - 1]
    )
}

/// `1m05s`, `2h03m`, `42s`.
pub(crate) fn human_duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instant() {
        // 2026-11-22 11:51:21 UTC, a Sunday.
        let t = 1_795_348_281;
        assert_eq!(iso(t), "2026-11-22T11:51:21Z");
        assert_eq!(progress_stamp(t), "Sun 22 Nov 2026 11:51:21 UTC");
        assert_eq!(human_duration(65.0), "1m05s");
    }
}
