//! The CPU tape's own count of the states it holds at once (snapshots, records, the state
//! after a reversed step) against the count its plan was accepted by
//! (`checkpoint::count`), for every policy over horizons around their boundaries.

use super::*;
use crate::config::Config;
use crate::grad::checkpoint::CheckpointOptions;
use crate::grad::fixtures::{every_policy, sheet};
use crate::grad::params::Param;

#[test]
fn the_plans_peak_is_what_the_cpu_tape_holds() {
    let system = sheet([3, 3]);
    let config = Config {
        dt: 1e-3,
        ..Config::default()
    };
    let set = ParamSet::new(&system, &config, &[Param::ChargeScale]).unwrap();
    let theta = set.initial();
    let bytes = record_bytes(config.integrator, system.len());
    for t in [1u64, 2, 3, 7, 16, 17] {
        let targets = [
            Target {
                step: t / 2,
                positions: system.positions().to_vec(),
            },
            Target {
                step: t,
                positions: system.positions().to_vec(),
            },
        ];
        for policy in every_policy() {
            let checkpoint = CheckpointOptions {
                policy,
                memory_budget: u64::MAX,
            };
            let plan = Plan::new(t, bytes, &checkpoint).unwrap();
            let options = GradOptions {
                checkpoint,
                ..GradOptions::default()
            };
            let (e, held) = sweep(&set, &theta, &targets, &options).unwrap();
            assert_eq!(held, plan.peak_states, "T = {t}, {policy:?}");
            assert_eq!(e.stats.checkpoint.unwrap().peak_states, held);
        }
    }
}
