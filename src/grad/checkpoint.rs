//! Checkpointing for the reverse sweep, shared by the CPU and GPU adjoints: which states
//! of the forward run are kept and which are recomputed, as a [`Plan`] of [`Action`]s that
//! a backend's `Tape` carries out.
//!
//! - store-all: every step's record is kept (T states, one forward run);
//! - two-level: a snapshot every c = ceil(sqrt(T)) steps, then each segment is run again
//!   with its records kept and reversed (at most about 2 sqrt(T) states; every step runs
//!   forward twice, the last segment once);
//! - binomial (Griewank and Walther's Revolve): s snapshots placed by the binomial rule, each
//!   step recomputed at most R times where R is the least with C(R + s, s + 1) >= T.
//!
//! Every plan, an explicit policy's included, is held to the memory budget by the most
//! states it keeps at once, counted from its actions as the tapes keep them (`count`).
//!
//! A recomputed step starts from a state the forward run passed through and repeats it bit
//! for bit (the backends' steps are deterministic: no float atomics, fixed reduction
//! orders); the tests of `crate::grad` check it on each backend.

use super::GradError;

/// Which states the reverse sweep keeps ([`Plan::new`] refuses any policy whose plan
/// keeps more than the memory budget holds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Checkpointing {
    /// Store-all when its T + 1 states fit the memory budget, two-level when its
    /// ~2 sqrt(T) states fit, else binomial with as many snapshots as fit.
    #[default]
    Auto,
    /// Every record kept (T + 1 states with the state after the reversed step).
    StoreAll,
    /// Snapshots every `interval` steps (None: ceil(sqrt(T))).
    TwoLevel { interval: Option<u64> },
    /// Revolve with this many snapshots (besides the initial state).
    Binomial { snapshots: u32 },
}

impl std::str::FromStr for Checkpointing {
    type Err = String;

    /// `auto`, `all`, `two-level`, `two-level:C` (interval C steps), `binomial:S`
    /// (S snapshots).
    fn from_str(text: &str) -> Result<Self, String> {
        let (name, arg) = match text.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (text.trim(), None),
        };
        let number = |a: &str| -> Result<u64, String> {
            a.parse::<u64>()
                .ok()
                .filter(|v| *v >= 1)
                .ok_or_else(|| format!("'{a}' is not a whole number of at least 1"))
        };
        match (name, arg) {
            ("auto", None) => Ok(Self::Auto),
            ("all", None) => Ok(Self::StoreAll),
            ("two-level", None) => Ok(Self::TwoLevel { interval: None }),
            ("two-level", Some(a)) => Ok(Self::TwoLevel {
                interval: Some(number(a)?),
            }),
            ("binomial", Some(a)) => Ok(Self::Binomial {
                snapshots: u32::try_from(number(a)?).map_err(|_| format!("'{a}' is too large"))?,
            }),
            ("binomial", None) => Err("binomial takes its snapshot count: binomial:S".into()),
            _ => Err(format!(
                "'{text}': expected auto, all, two-level[:C] or binomial:S"
            )),
        }
    }
}

/// The checkpointing policy and the memory it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointOptions {
    pub policy: Checkpointing,
    /// Bytes the kept states may take ([`Checkpointing::Auto`] chooses with it; a plan of
    /// any policy that keeps more is refused).
    pub memory_budget: u64,
}

/// 1 GiB of kept states by default.
pub const DEFAULT_MEMORY_BUDGET: u64 = 1 << 30;

impl Default for CheckpointOptions {
    fn default() -> Self {
        Self {
            policy: Checkpointing::Auto,
            memory_budget: DEFAULT_MEMORY_BUDGET,
        }
    }
}

/// One instruction of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Keep the current state in snapshot slot `0`.
    Save(usize),
    /// Make snapshot `0` the current state.
    Restore(usize),
    /// Run n steps forward, keeping nothing.
    Advance(u64),
    /// Run n steps forward, keeping each step's record.
    Record(u64),
    /// Reverse the n most recent recorded steps (the current state becomes the state
    /// before the earliest of them).
    Reverse(u64),
}

/// A checkpointing plan over T steps and what it costs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub policy: Checkpointing,
    pub steps: u64,
    pub actions: Vec<Action>,
    /// Snapshot slots used.
    pub slots: usize,
    /// Forward steps run (the first run included).
    pub forward_steps: u64,
    /// Largest number of states kept at once (snapshots, records and the state after the
    /// reversed step; see `count`), saturated at u64::MAX.
    pub peak_states: u64,
}

/// What a backend does for each [`Action`].
pub(crate) trait Tape {
    fn save(&mut self, slot: usize) -> Result<(), GradError>;
    fn restore(&mut self, slot: usize) -> Result<(), GradError>;
    fn advance(&mut self, n: u64, record: bool) -> Result<(), GradError>;
    fn reverse(&mut self, n: u64) -> Result<(), GradError>;
}

impl Plan {
    /// The plan for `steps` steps whose kept states take `state_bytes` each. Every
    /// policy, an explicit one included, is refused ([`GradError::Horizon`]) when the
    /// most states its plan keeps at once (`count`) exceed the memory budget.
    pub fn new(
        steps: u64,
        state_bytes: u64,
        options: &CheckpointOptions,
    ) -> Result<Self, GradError> {
        let budget = options.memory_budget;
        let fits = |peak: u128| peak * u128::from(state_bytes) <= u128::from(budget);
        let (plan, peak) = match options.policy {
            Checkpointing::Auto => {
                let mut chosen = None;
                for p in [
                    Checkpointing::StoreAll,
                    Checkpointing::TwoLevel { interval: None },
                ] {
                    let (plan, peak) = Self::build(p, steps)?;
                    if fits(peak) {
                        chosen = Some((plan, peak));
                        break;
                    }
                }
                match chosen {
                    Some(c) => c,
                    None => {
                        let states = budget / state_bytes.max(1);
                        if states < 3 {
                            return Err(GradError::Param(format!(
                                "the checkpoint memory budget ({budget} bytes) holds fewer \
                                 than 3 states of {state_bytes} bytes"
                            )));
                        }
                        // Binomial keeps at most its S + 1 slots (the initial state's
                        // included), one record and the state after it.
                        let snapshots = (states - 3).min(u64::from(u32::MAX)) as u32;
                        Self::build(Checkpointing::Binomial { snapshots }, steps)?
                    }
                }
            }
            p => Self::build(p, steps)?,
        };
        if !fits(peak) {
            return Err(over_budget(
                options.policy,
                steps,
                peak,
                state_bytes,
                budget,
            ));
        }
        Ok(plan)
    }

    /// The plan of `policy` (not `Auto`) and the most states it keeps at once, exact.
    fn build(policy: Checkpointing, steps: u64) -> Result<(Self, u128), GradError> {
        // The plan is listed up front: a horizon whose list would not fit in memory is
        // refused here rather than aborting on the allocation.
        let listed = match policy {
            Checkpointing::StoreAll | Checkpointing::Auto => 2,
            Checkpointing::TwoLevel { interval } => {
                let c = interval.unwrap_or_else(|| sqrt_interval(steps)).max(1);
                steps.div_ceil(c).saturating_mul(3)
            }
            Checkpointing::Binomial { .. } => steps.saturating_mul(BINOMIAL_ACTIONS_PER_STEP),
        };
        if listed > MAX_PLAN_ACTIONS {
            return Err(GradError::Horizon {
                steps,
                reason: format!(
                    "the adjoint's {} checkpoint plan would list about {listed} actions, over \
                     its limit of {MAX_PLAN_ACTIONS} (binomial: {BINOMIAL_ACTIONS_PER_STEP} \
                     per step); use fewer steps, a larger --checkpoint-memory or forward \
                     gradients",
                    policy_name(policy)
                ),
            });
        }
        let actions = match policy {
            Checkpointing::StoreAll | Checkpointing::Auto => {
                vec![Action::Record(steps), Action::Reverse(steps)]
            }
            Checkpointing::TwoLevel { interval } => {
                let c = interval.unwrap_or_else(|| sqrt_interval(steps));
                if c == 0 {
                    return Err(GradError::Param(
                        "the two-level checkpoint interval must be at least 1 step".into(),
                    ));
                }
                two_level(steps, c)
            }
            Checkpointing::Binomial { snapshots } => {
                let mut a = vec![Action::Save(0)];
                binomial(0, steps, snapshots as usize, 0, &mut a);
                a
            }
        };
        let c = count(&actions);
        let plan = Self {
            policy,
            steps,
            actions,
            slots: c.slots,
            forward_steps: c.forward,
            peak_states: u64::try_from(c.peak).unwrap_or(u64::MAX),
        };
        Ok((plan, c.peak))
    }

    /// Carries the plan out on `tape`.
    pub(crate) fn execute(&self, tape: &mut impl Tape) -> Result<(), GradError> {
        for a in &self.actions {
            match *a {
                Action::Save(s) => tape.save(s)?,
                Action::Restore(s) => tape.restore(s)?,
                Action::Advance(n) if n > 0 => tape.advance(n, false)?,
                Action::Record(n) if n > 0 => tape.advance(n, true)?,
                Action::Reverse(n) if n > 0 => tape.reverse(n)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// Most actions a [`Plan`] may list (16 bytes each: 1 GiB).
pub const MAX_PLAN_ACTIONS: u64 = 1 << 26;

/// A bound on the actions binomial lists per step (a record and a reverse per step, an
/// advance, save and restore per split).
const BINOMIAL_ACTIONS_PER_STEP: u64 = 5;

fn policy_name(p: Checkpointing) -> &'static str {
    match p {
        Checkpointing::Auto | Checkpointing::StoreAll => "store-all",
        Checkpointing::TwoLevel { .. } => "two-level",
        Checkpointing::Binomial { .. } => "binomial",
    }
}

/// The user's spelling of a policy (`--checkpoint`'s value).
fn policy_text(p: Checkpointing) -> String {
    match p {
        Checkpointing::Auto => "auto".into(),
        Checkpointing::StoreAll => "all".into(),
        Checkpointing::TwoLevel { interval: None } => "two-level".into(),
        Checkpointing::TwoLevel { interval: Some(c) } => format!("two-level:{c}"),
        Checkpointing::Binomial { snapshots } => format!("binomial:{snapshots}"),
    }
}

/// The refusal of a plan of `policy` whose `peak` states of `state_bytes` exceed `budget`,
/// with what would fit better.
fn over_budget(
    policy: Checkpointing,
    steps: u64,
    peak: u128,
    state_bytes: u64,
    budget: u64,
) -> GradError {
    let c0 = sqrt_interval(steps);
    let advice = match policy {
        Checkpointing::StoreAll => "raise --checkpoint-memory or use --checkpoint auto \
             (two-level or binomial within the budget)"
            .to_string(),
        // Fewest states near C = ceil(sqrt T): snapshots fall as C grows, records rise.
        Checkpointing::TwoLevel { interval: Some(c) } => format!(
            "use a {} C, nearer ceil(sqrt T) = {c0}, binomial:S, a larger \
             --checkpoint-memory or --checkpoint auto",
            if c > c0 { "smaller" } else { "larger" }
        ),
        Checkpointing::TwoLevel { interval: None } => "use binomial:S, raise \
             --checkpoint-memory or use --checkpoint auto (binomial within the budget)"
            .to_string(),
        Checkpointing::Binomial { .. } => "use a smaller S, raise --checkpoint-memory or \
             use --checkpoint auto (as many snapshots as fit)"
            .to_string(),
        Checkpointing::Auto => "raise --checkpoint-memory".to_string(),
    };
    GradError::Horizon {
        steps,
        reason: format!(
            "--checkpoint {} would keep {peak} states of {state_bytes} bytes at once, {} \
             bytes, over the --checkpoint-memory budget of {budget} bytes ({} MiB); {advice}",
            policy_text(policy),
            peak * u128::from(state_bytes),
            budget as f64 / (1u64 << 20) as f64
        ),
    }
}

/// What carrying out a plan's actions keeps and runs ([`count`]).
struct Counts {
    slots: usize,
    forward: u64,
    peak: u128,
}

/// Snapshot slots, forward steps and the most states kept at once when `actions` are
/// carried out (one place for every policy, as the tapes hold them). Both tapes keep a
/// slot from its first save to the end of the sweep and each record until it is
/// reversed. The CPU tape (`adjoint::CpuTape`) also holds the state after the step it
/// reverses, beside that step's record, until the forward moves on or a slot is
/// restored, and a slot saved again holds its new copy before the old one goes. The GPU
/// tape (`GpuAdjoint`) keeps its record buffers, up to the deepest stack, for reuse. The
/// peak is the larger of the two counts. Empty runs are skipped, as [`Plan::execute`]
/// skips them.
fn count(actions: &[Action]) -> Counts {
    let (mut slots, mut forward) = (0usize, 0u64);
    let mut held = std::collections::HashSet::new();
    let (mut snapshots, mut records, mut deepest, mut cpu) = (0u128, 0u128, 0u128, 0u128);
    let mut after = false;
    for a in actions {
        let extra = match *a {
            Action::Save(s) => {
                slots = slots.max(s + 1);
                let again = !held.insert(s);
                snapshots += u128::from(!again);
                u128::from(again)
            }
            Action::Restore(_) => {
                after = false;
                0
            }
            Action::Advance(0) | Action::Record(0) | Action::Reverse(0) => 0,
            Action::Advance(n) => {
                forward = forward.saturating_add(n);
                after = false;
                0
            }
            Action::Record(n) => {
                forward = forward.saturating_add(n);
                records += u128::from(n);
                deepest = deepest.max(records);
                after = false;
                0
            }
            Action::Reverse(n) => {
                // The first reversal holds its record and the state after it at once.
                cpu = cpu.max(snapshots + records + 1);
                records -= u128::from(n);
                after = true;
                0
            }
        };
        cpu = cpu.max(snapshots + records + u128::from(after) + extra);
    }
    Counts {
        slots,
        forward,
        peak: cpu.max(snapshots + deepest),
    }
}

/// ceil(sqrt(T)), at least 1 (no overflow near u64::MAX).
fn sqrt_interval(steps: u64) -> u64 {
    let square = |c: u64| c.saturating_mul(c);
    let mut c = (steps as f64).sqrt().ceil() as u64;
    while c > 1 && square(c - 1) >= steps {
        c -= 1;
    }
    while square(c) < steps {
        c += 1;
    }
    c.max(1)
}

/// Snapshots at 0, c, 2c, ...; the last segment is recorded by the first run.
fn two_level(steps: u64, c: u64) -> Vec<Action> {
    let segments = steps.div_ceil(c);
    let len = |k: u64| (k + 1).saturating_mul(c).min(steps) - k * c;
    let mut a = Vec::new();
    for k in 0..segments {
        if k + 1 < segments {
            a.push(Action::Save(k as usize));
            a.push(Action::Advance(len(k)));
        } else {
            a.push(Action::Record(len(k)));
        }
    }
    if segments > 0 {
        a.push(Action::Reverse(len(segments - 1)));
    }
    for k in (0..segments.saturating_sub(1)).rev() {
        a.push(Action::Restore(k as usize));
        a.push(Action::Record(len(k)));
        a.push(Action::Reverse(len(k)));
    }
    a
}

/// The longest run that `free` snapshots reverse with each step run forward at most
/// `reps` times: C(reps + free, free + 1) (saturating).
pub(crate) fn binomial_reach(reps: u64, free: u64) -> u64 {
    // C(reps + free, free + 1) = prod_{i=1}^{free+1} (reps - 1 + i) / i.
    let mut c: u128 = 1;
    for i in 1..=free + 1 {
        c = c * u128::from(reps - 1 + i) / u128::from(i);
        if c > u128::from(u64::MAX) {
            return u64::MAX;
        }
    }
    c as u64
}

/// The least number of forward steps (records included) that reverses l steps with
/// `free` snapshots: l (l + 1) / 2 without any, else R l - C(R + free, free + 2) with R
/// the least repetition count whose [`binomial_reach`] covers l (Griewank and Walther).
pub(crate) fn optimal_cost(l: u64, free: u64) -> u64 {
    if l <= 1 {
        return l;
    }
    if free == 0 {
        return l.saturating_mul(l + 1) / 2;
    }
    let mut reps = 1;
    while binomial_reach(reps, free) < l {
        reps += 1;
    }
    // C(reps + free, free + 2) = reach(reps - 1, free + 1).
    let c = if reps >= 2 {
        binomial_reach(reps - 1, free + 1)
    } else {
        0
    };
    reps.saturating_mul(l) - c
}

/// Reverses steps [a, b) from the current state s_a, which snapshot `slot` holds; `free`
/// more snapshot slots (numbered after `slot`) may be used.
fn binomial(a: u64, b: u64, free: usize, slot: usize, out: &mut Vec<Action>) {
    let l = b - a;
    if l == 0 {
        return;
    }
    // More than l - 1 free snapshots change no cost (each step then runs once), so the
    // same plan; without the clamp a huge S made every cost a loop over S.
    let free = free.min(usize::try_from(l - 1).unwrap_or(usize::MAX));
    if l == 1 {
        out.push(Action::Record(1));
        out.push(Action::Reverse(1));
        return;
    }
    if free == 0 {
        for t in (a..b).rev() {
            if t != b - 1 {
                out.push(Action::Restore(slot));
            }
            out.push(Action::Advance(t - a));
            out.push(Action::Record(1));
            out.push(Action::Reverse(1));
        }
        return;
    }
    // The first snapshot where the total cost m + cost(l - m, free - 1) + cost(m, free) is
    // least: convex in m (each cost is convex and piecewise linear), so bisect its slope.
    let f = free as u64;
    let g = |m: u64| m + optimal_cost(l - m, f - 1) + optimal_cost(m, f);
    let (mut lo, mut hi) = (1, l - 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if g(mid + 1) >= g(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let left = lo;
    let m = a + left;
    out.push(Action::Advance(left));
    out.push(Action::Save(slot + 1));
    binomial(m, b, free - 1, slot + 1, out);
    out.push(Action::Restore(slot));
    binomial(a, m, free, slot, out);
}

/// What the checkpointing kept and recomputed in one reverse sweep.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CheckpointStats {
    /// "store_all", "two_level" or "binomial".
    pub policy: &'static str,
    /// Snapshot slots of the plan (binomial: its snapshots).
    pub slots: usize,
    /// Forward steps run, the first run's included.
    pub forward_steps: u64,
    /// Most states (snapshots plus records) kept at once.
    pub peak_states: u64,
    /// Bytes per kept state.
    pub state_bytes: u64,
    /// Bytes of the per-element parameter cotangents.
    pub accumulator_bytes: u64,
    /// Wall time of the set-up (the simulator; on the GPU the device, pipelines and
    /// buffers) and of the sweeps (every forward and reverse step, the final reads).
    pub setup_seconds: f64,
    pub sweep_seconds: f64,
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
