//! When a usage limit resets, from the words and fields every agent CLI
//! uses to say so ("resets 5pm (UTC)", "try again at 3:51 PM", "Try again in
//! 4 days 20 hours 9 minutes", `resetsAt`, ...). Pure: the caller passes the
//! clock and the local UTC offset.

/// The reset time (Unix seconds) a limit message names, if it names one.
/// `now` is the current Unix time; `local_offset_secs` the machine's UTC
/// offset, for times given without a zone.
pub(crate) fn reset_time(_text: &str, _now: i64, _local_offset_secs: i32) -> Option<i64> {
    None
}
