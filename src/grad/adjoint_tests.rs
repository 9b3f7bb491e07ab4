//! The CPU tape's own count of the states it holds at once (snapshots, records, the state
//! after a reversed step) against the count its plan was accepted by
//! (`checkpoint::count`), for every policy over horizons around their boundaries.

use super::*;
use crate::config::Config;
use crate::grad::checkpoint::CheckpointOptions;
use crate::grad::params::Param;
use crate::model::mesh::grid;
use crate::model::{Spring, System, SystemDesc};

fn sheet() -> System {
    let mesh = grid([1.0, 1.0], [3, 3], true, false).unwrap();
    let n = mesh.positions.len();
    System::new(SystemDesc {
        positions: mesh.positions.clone(),
        masses: vec![0.01; n],
        charges: vec![1e-7; n],
        springs: mesh
            .edges
            .iter()
            .map(|&[i, j]| Spring {
                i,
                j,
                stiffness: 10.0,
                rest_length: 0.3,
                damping: 0.0,
            })
            .collect(),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn the_plans_peak_is_what_the_cpu_tape_holds() {
    let system = sheet();
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
        for policy in [
            Checkpointing::StoreAll,
            Checkpointing::TwoLevel { interval: None },
            Checkpointing::TwoLevel { interval: Some(1) },
            Checkpointing::TwoLevel { interval: Some(5) },
            Checkpointing::TwoLevel {
                interval: Some(100),
            },
            Checkpointing::Binomial { snapshots: 1 },
            Checkpointing::Binomial { snapshots: 3 },
            Checkpointing::Binomial { snapshots: 100 },
        ] {
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
