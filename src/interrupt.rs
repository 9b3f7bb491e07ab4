//! Stop requests: SIGINT (Ctrl-C) and SIGTERM (what a batch scheduler sends) set a flag
//! that the run loops read between steps, so an interrupted run finishes its current step
//! and writes every output so far (exit 130). A second signal ends the process at once,
//! with [`EXIT_CODE_AT_ONCE`]: the run under way is then incomplete (no `summary.json`;
//! the rows so far are in its hidden `.energy.csv.tmp-*` file), as after a SIGKILL.
//! An embedder running several calls at once stops one of them with a [`Scope`] of its
//! own, which neither clears nor raises the others' requests; a run's own threads run in
//! its caller's scope ([`current`], [`Scope::enter`]). Long work that runs as one call
//! (GPU advances, Python's `step(n)`) is cut into [`Chunks`] so a request is read between.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// True once a stop was requested: by a signal or [`request`], or, on a thread running
/// inside a [`Scope`], by that scope. A thread outside every scope (one a run spawned)
/// also stops while any live scope is raised, as it cannot tell whose work it does.
pub fn requested() -> bool {
    flag().load(Ordering::Relaxed)
        || SCOPE.with(|s| match &*s.borrow() {
            Some(own) => own.0.load(Ordering::Relaxed),
            None => RAISED.load(Ordering::Relaxed) > 0,
        })
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

thread_local! {
    /// The scope this thread's work runs in, if any.
    static SCOPE: RefCell<Option<Arc<ScopeFlag>>> = const { RefCell::new(None) };
}

/// The scope this thread runs in, if any: for a thread it spawns to run in too
/// ([`Scope::enter`]), so the spawned work stops with this call's scope and no other.
pub fn current() -> Option<Scope> {
    SCOPE.with(|s| s.borrow().clone().map(Scope))
}

/// How many live scopes are raised (read by threads outside every scope).
static RAISED: AtomicUsize = AtomicUsize::new(0);

struct ScopeFlag(AtomicBool);

impl Drop for ScopeFlag {
    fn drop(&mut self) {
        if self.0.load(Ordering::Relaxed) {
            RAISED.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One caller's own stop request: work run through [`Scope::run`] stops when this scope
/// is raised (or on a signal), and raising it does not stop another scope's work.
#[derive(Clone)]
pub struct Scope(Arc<ScopeFlag>);

impl Default for Scope {
    fn default() -> Self {
        Self::new()
    }
}

impl Scope {
    /// A scope not yet raised.
    pub fn new() -> Self {
        Self(Arc::new(ScopeFlag(AtomicBool::new(false))))
    }

    /// Asks the work running in this scope to stop (idempotent).
    pub fn request(&self) {
        if !self.0 .0.swap(true, Ordering::Relaxed) {
            RAISED.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// True once this scope was raised.
    pub fn requested(&self) -> bool {
        self.0 .0.load(Ordering::Relaxed)
    }

    /// Runs `work` on this thread inside this scope; the thread's previous scope comes
    /// back after it, a panic included.
    pub fn run<T>(&self, work: impl FnOnce() -> T) -> T {
        let _entered = self.enter();
        work()
    }

    /// Puts this thread in this scope until the guard drops, when its previous scope
    /// comes back (a panic included).
    pub fn enter(&self) -> Entered {
        let previous = SCOPE.with(|s| s.borrow_mut().replace(self.0.clone()));
        Entered(previous, std::marker::PhantomData)
    }
}

/// A thread inside a [`Scope`] ([`Scope::enter`]); not `Send`, as it restores the
/// thread's own previous scope.
pub struct Entered(Option<Arc<ScopeFlag>>, std::marker::PhantomData<*const ()>);

impl Drop for Entered {
    fn drop(&mut self) {
        let previous = self.0.take();
        SCOPE.with(|s| *s.borrow_mut() = previous);
    }
}

/// The wall time a chunk of steps grows to: a stop request (or Python's signal check)
/// between chunks is answered within about this.
pub const CHUNK_SECONDS: f64 = 0.05;

/// Runs a long count of steps in chunks that double from one step until one takes
/// [`CHUNK_SECONDS`], the size kept from call to call (short intervals are not split again
/// and again). The caller checks for a stop inside `advance`; the steps run are the same,
/// in the same order, as one call's.
#[derive(Debug)]
pub struct Chunks {
    size: u64,
}

impl Default for Chunks {
    fn default() -> Self {
        Self::new()
    }
}

impl Chunks {
    pub fn new() -> Self {
        Self { size: 1 }
    }

    /// `advance(k)` for chunks of k steps adding up to `n`; its first error ends the run.
    pub fn run<E>(
        &mut self,
        n: u64,
        mut advance: impl FnMut(u64) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut left = n;
        while left > 0 {
            let k = self.size.min(left);
            let start = std::time::Instant::now();
            advance(k)?;
            left -= k;
            if start.elapsed().as_secs_f64() < CHUNK_SECONDS {
                self.size = self.size.saturating_mul(2);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Chunks;

    #[test]
    fn chunks_double_from_one_step_and_add_up_to_the_count() {
        let mut chunks = Chunks::new();
        let mut sizes = Vec::new();
        chunks
            .run(100, |k| {
                sizes.push(k);
                Ok::<_, ()>(())
            })
            .unwrap();
        // Cheap chunks: 1, 2, 4, ... until the count runs out.
        assert_eq!(sizes, [1, 2, 4, 8, 16, 32, 37]);
        // The size carries over to the next call, and an error ends the run there.
        let mut seen = Vec::new();
        let r = chunks.run(1000, |k| {
            seen.push(k);
            if seen.len() == 2 {
                Err("stop")
            } else {
                Ok(())
            }
        });
        assert_eq!((r, seen), (Err("stop"), vec![128, 256]));
    }
}
