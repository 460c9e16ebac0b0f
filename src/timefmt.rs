//! Timestamps: jiff does the calendar and the machine's time zone.

use jiff::tz::TimeZone;
use jiff::Timestamp;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

pub(crate) fn now_secs() -> i64 {
    Timestamp::now().as_second()
}

/// The machine's UTC offset (seconds east) at `unix`, from its zone rules
/// (`TZ`, /etc/localtime); 0 (UTC) when it has none.
pub(crate) fn local_offset_secs(unix: i64) -> i32 {
    TimeZone::system().to_offset(at(unix)).seconds()
}

/// `2026-11-22T11:51:21Z`
pub(crate) fn iso(secs: i64) -> String {
    at(secs).strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `20261122-115121`: a second in UTC as a file name's part (run IDs, a
/// state file set aside), sorting as the time does.
pub(crate) fn file_stamp(secs: i64) -> String {
    at(secs).strftime("%Y%m%d-%H%M%S").to_string()
}

/// `2026-11-22T11:51:21.123Z`: the technical log needs sub-second order.
pub(crate) fn iso_now_millis() -> String {
    Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// The bash tool's progress.txt stamp, in local time as `date` printed it:
/// `Sun 22 Nov 2026 11:51:21 UTC`.
pub(crate) fn progress_stamp(secs: i64) -> String {
    progress_stamp_in(secs, &TimeZone::system())
}

fn progress_stamp_in(secs: i64, tz: &TimeZone) -> String {
    at(secs)
        .to_zoned(tz.clone())
        .strftime("%a %d %b %Y %H:%M:%S %Z")
        .to_string()
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
        assert_eq!(
            progress_stamp_in(t, &TimeZone::UTC),
            "Sun 22 Nov 2026 11:51:21 UTC"
        );
        // A POSIX rule, so the test needs no zoneinfo files.
        let paris = TimeZone::posix("CET-1CEST,M3.5.0,M10.5.0/3").unwrap();
        assert_eq!(progress_stamp_in(t, &paris), "Sun 22 Nov 2026 12:51:21 CET");
        assert_eq!(human_duration(65.0), "1m05s");
    }
}
