//! A value computed once on first use by parallel (rayon) work, without holding a lock
//! while that work runs.
//!
//! `OnceLock::get_or_init` blocks every other caller while its closure runs. When the
//! closure itself runs a rayon parallel loop and the callers are rayon tasks (a DDEF
//! evaluation's far field, first asked for by the targets of a parallel gather or by the
//! directions of a parallel tangent), the initialising thread can steal one of those
//! tasks while it waits for its own, and that task blocks on the lock the thread holds:
//! every worker asleep, for ever (seen on a 16-core machine, never on two cores, so no
//! unit test here reproduces it). Here the value is computed
//! outside the lock; callers that race compute it more than once and the first result is
//! kept (the computation is deterministic, so they agree).

use std::sync::OnceLock;

/// `cell`'s value, computed by `init` (which may run rayon work) when it has none yet.
pub(crate) fn once_parallel<T>(cell: &OnceLock<T>, init: impl FnOnce() -> T) -> &T {
    if let Some(v) = cell.get() {
        return v;
    }
    let v = init();
    // A racing caller may have set it first; keep that one (the same value).
    let _ = cell.set(v);
    cell.get().expect("set above")
}
