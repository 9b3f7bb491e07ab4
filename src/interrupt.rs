//! Stop requests: SIGINT (Ctrl-C) and SIGTERM (what a batch scheduler sends) set a flag
//! that the run loops read between steps, so an interrupted run finishes its current step
//! and writes every output so far (exit 130). A second signal ends the process at once,
//! with [`EXIT_CODE_AT_ONCE`]: the run under way is then incomplete (no `summary.json`;
//! the rows so far are in its hidden `.energy.csv.tmp-*` file), as after a SIGKILL.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// The exit status of a run stopped by a signal (128 + SIGINT, the shell convention),
/// after writing every output so far.
pub const EXIT_CODE: i32 = 130;

/// The exit status of a process ended at once by a second signal, its outputs incomplete:
/// 137 (128 + SIGKILL), what a killed run gives, as the folder is left in the same state.
pub const EXIT_CODE_AT_ONCE: i32 = 137;

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

fn flag() -> &'static Arc<AtomicBool> {
    FLAG.get_or_init(|| Arc::new(AtomicBool::new(false)))
}

/// Installs the handlers (idempotent). Where they cannot be installed the default
/// behaviour stays, and the reason is returned for a note.
pub fn install() -> Result<(), std::io::Error> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    let result = INSTALLED.get_or_init(|| {
        #[cfg(unix)]
        {
            use signal_hook::consts::{SIGINT, SIGTERM};
            for sig in [SIGINT, SIGTERM] {
                // Registered first, so it sees the flag before the second handler sets
                // it: the second signal exits, the first only asks to stop.
                signal_hook::flag::register_conditional_shutdown(
                    sig,
                    EXIT_CODE_AT_ONCE,
                    flag().clone(),
                )
                .map_err(|e| e.to_string())?;
                signal_hook::flag::register(sig, flag().clone()).map_err(|e| e.to_string())?;
            }
        }
        #[cfg(windows)]
        {
            signal_hook::flag::register(signal_hook::consts::SIGINT, flag().clone())
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    });
    result.clone().map_err(std::io::Error::other)
}

/// True once a stop was requested.
pub fn requested() -> bool {
    flag().load(Ordering::Relaxed)
}

/// Asks the run loops to stop, as a signal would (tests, and embedders with their own
/// signal handling).
pub fn request() {
    flag().store(true, Ordering::Relaxed);
}

/// Clears a request (an embedder that goes on after an interrupted run).
pub fn clear() {
    flag().store(false, Ordering::Relaxed);
}
