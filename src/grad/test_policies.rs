//! Every kind of checkpoint policy the tests run, with settings at and past their edges
//! (a snapshot every step, none within the horizon, more snapshots than steps). One list
//! for the unit tests (grad::fixtures) and tests/gpu_adjoint.rs (tests/common), which each
//! compile it with `Checkpointing` in scope of the module that includes it.

use super::Checkpointing;

/// Store-all, two-level (its own interval, 1, 5 and 1000 steps) and binomial (1, 3 and
/// 1000 snapshots); the tests' horizons stay far below 1000.
pub fn every_policy() -> [Checkpointing; 8] {
    [
        Checkpointing::StoreAll,
        Checkpointing::TwoLevel { interval: None },
        Checkpointing::TwoLevel { interval: Some(1) },
        Checkpointing::TwoLevel { interval: Some(5) },
        Checkpointing::TwoLevel {
            interval: Some(1000),
        },
        Checkpointing::Binomial { snapshots: 1 },
        Checkpointing::Binomial { snapshots: 3 },
        Checkpointing::Binomial { snapshots: 1000 },
    ]
}
