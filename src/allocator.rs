//! What ralph asks of the C allocator during a run (issue 35, finding 7 of
//! the soak). glibc gives each thread that allocates an arena of its own,
//! up to eight per core, and keeps what is freed there for reuse: over a
//! night of landings the tokio workers' and blocking threads' arenas held
//! ~29 KB more a landed story while the live heap stayed under 9 MB. Fewer
//! arenas and handing free pages back after each landing keep the resident
//! size near what is in use. Elsewhere (musl, macOS) both are no-ops.

/// Arenas a run's allocations share: ralph's threads mostly wait on
/// processes and git, so they seldom contend for an arena's lock.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;

/// Caps the allocator's arenas for this process, unless the user set
/// `MALLOC_ARENA_MAX` (glibc reads it at start; theirs wins).
pub(crate) fn few_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a tunable; called before the run's
        // threads start allocating.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, ARENAS);
        }
    }
}

/// Returns freed memory at the top of each arena and whole free pages
/// inside them to the system. A landing frees the most (its merge, its
/// diffs, its records), so the run calls this after each.
pub(crate) fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim walks the allocator's own free lists under its
    // locks; it is safe from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
