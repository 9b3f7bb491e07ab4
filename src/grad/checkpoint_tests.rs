//! Plans checked by running them symbolically: every step is reversed exactly once, in
//! decreasing order, each from the state it started at; the memory and recomputation
//! bounds of each policy hold.

use super::*;

/// Runs `plan` on step numbers: returns the reversed steps in order and the most times
/// any one step ran forward.
fn run(plan: &Plan) -> (Vec<u64>, u64) {
    let mut current = 0u64;
    let mut slots = vec![None; plan.slots];
    let mut records: Vec<u64> = Vec::new();
    let mut reversed = Vec::new();
    let mut runs = vec![0u64; plan.steps as usize];
    for a in &plan.actions {
        match *a {
            Action::Save(s) => slots[s] = Some(current),
            Action::Restore(s) => current = slots[s].expect("restore of an empty slot"),
            Action::Advance(n) | Action::Record(n) => {
                for _ in 0..n {
                    runs[current as usize] += 1;
                    if matches!(a, Action::Record(_)) {
                        records.push(current);
                    }
                    current += 1;
                }
            }
            Action::Reverse(n) => {
                for _ in 0..n {
                    let t = records.pop().expect("reverse without a record");
                    assert_eq!(t + 1, current, "the record is not the last step run");
                    reversed.push(t);
                    current = t;
                }
            }
        }
    }
    (reversed, runs.iter().copied().max().unwrap_or(0))
}

fn check(plan: &Plan) -> u64 {
    let (reversed, max_runs) = run(plan);
    let expect: Vec<u64> = (0..plan.steps).rev().collect();
    assert_eq!(
        reversed, expect,
        "{:?} over {} steps",
        plan.policy, plan.steps
    );
    max_runs
}

fn opts(policy: Checkpointing) -> CheckpointOptions {
    CheckpointOptions {
        policy,
        memory_budget: u64::MAX,
    }
}

#[test]
fn store_all_runs_each_step_once() {
    for t in [1, 2, 7, 200] {
        let p = Plan::new(t, 8, &opts(Checkpointing::StoreAll)).unwrap();
        assert_eq!(check(&p), 1);
        // T records and the state after the step being reversed.
        assert_eq!((p.forward_steps, p.peak_states), (t, t + 1));
    }
}

#[test]
fn two_level_keeps_about_two_sqrt_t_states_and_runs_each_step_at_most_twice() {
    for t in [1u64, 2, 3, 10, 99, 100, 101, 200, 1000, 4097] {
        let p = Plan::new(t, 8, &opts(Checkpointing::TwoLevel { interval: None })).unwrap();
        assert!(check(&p) <= 2);
        let bound = 2.0 * (t as f64).sqrt() + 2.0;
        assert!(
            p.peak_states as f64 <= bound,
            "T = {t}: {} states > 2 sqrt(T) + 2",
            p.peak_states
        );
        // The last segment is not run again.
        let c = sqrt_interval(t);
        assert_eq!(p.forward_steps, 2 * t - (t - (t.div_ceil(c) - 1) * c));
    }
    let p = Plan::new(50, 8, &opts(Checkpointing::TwoLevel { interval: Some(7) })).unwrap();
    check(&p);
}

/// The least possible number of forward steps to reverse l steps with s free snapshots
/// (the record of each reversed step counted), by dynamic programming over the first
/// snapshot's place.
fn optimal(l: usize, s: usize, memo: &mut std::collections::HashMap<(usize, usize), u64>) -> u64 {
    if l <= 1 {
        return l as u64;
    }
    if s == 0 {
        return (l * (l + 1) / 2) as u64;
    }
    if let Some(&v) = memo.get(&(l, s)) {
        return v;
    }
    let best = (1..l)
        .map(|m| m as u64 + optimal(l - m, s - 1, memo) + optimal(m, s, memo))
        .min()
        .unwrap();
    memo.insert((l, s), best);
    best
}

#[test]
fn binomial_meets_the_repetition_bound_and_the_optimal_cost() {
    let mut memo = std::collections::HashMap::new();
    for s in 1..=4u32 {
        for t in 1..=60u64 {
            let p = Plan::new(t, 8, &opts(Checkpointing::Binomial { snapshots: s })).unwrap();
            let max_runs = check(&p);
            let mut reps = 1;
            while binomial_reach(reps, u64::from(s)) < t {
                reps += 1;
            }
            assert!(max_runs <= reps, "T = {t}, s = {s}: {max_runs} > {reps}");
            assert!(p.slots <= s as usize + 1);
            let best = optimal(t as usize, s as usize, &mut memo);
            assert_eq!(p.forward_steps, best, "T = {t}, s = {s}");
        }
    }
    // A long horizon with few snapshots stays cheap: 10^4 steps, 20 snapshots, each step
    // run at most 5 times (C(25, 21) = 12650 >= 10^4 > C(24, 21) = 2024), the total at
    // the optimum's closed form.
    let p = Plan::new(10_000, 8, &opts(Checkpointing::Binomial { snapshots: 20 })).unwrap();
    assert_eq!(check(&p), 5);
    // 21 slots (the initial state's included), one record and the state after it.
    assert_eq!(p.peak_states, 23);
    assert_eq!(p.forward_steps, optimal_cost(10_000, 20));
    assert!(p.forward_steps < 5 * 10_000);
}

#[test]
fn auto_picks_by_the_budget() {
    let pick = |budget: u64| {
        let o = CheckpointOptions {
            policy: Checkpointing::Auto,
            memory_budget: budget,
        };
        Plan::new(400, 100, &o).map(|p| (p.policy, p.peak_states))
    };
    assert_eq!(pick(401 * 100).unwrap().0, Checkpointing::StoreAll);
    let (policy, peak) = pick(50 * 100).unwrap();
    assert_eq!(policy, Checkpointing::TwoLevel { interval: None });
    assert!(peak <= 42);
    let (policy, peak) = pick(12 * 100).unwrap();
    assert_eq!(policy, Checkpointing::Binomial { snapshots: 9 });
    assert_eq!(peak, 12);
    assert!(pick(2 * 100).is_err());
}

/// A huge horizon (a target's time over a tiny dt) made `Auto` choose binomial and list
/// about 5 actions per step up front: 1e12 steps aborted on the allocation, and
/// two-level's interval overflowed near u64::MAX. Now a typed error names the steps and
/// the limit, and the bound the refusal uses holds for the plans that are built.
#[test]
fn a_plan_too_long_to_list_is_refused_not_allocated() {
    let budget = CheckpointOptions::default();
    for (steps, options) in [
        (1_000_000_000_000, budget),
        (u64::MAX, opts(Checkpointing::TwoLevel { interval: None })),
        (u64::MAX, opts(Checkpointing::Binomial { snapshots: 3 })),
        (u64::MAX, opts(Checkpointing::Auto)),
    ] {
        match Plan::new(steps, 768, &options) {
            Err(GradError::Horizon { steps: s, reason }) => {
                assert_eq!(s, steps);
                assert!(reason.contains(&MAX_PLAN_ACTIONS.to_string()), "{reason}");
            }
            Ok(p) => assert!(p.actions.len() as u64 <= MAX_PLAN_ACTIONS, "{steps}"),
            Err(e) => panic!("{steps}: {e}"),
        }
    }
    assert!(Plan::new(1_000_000_000_000, 768, &budget).is_err());
    for s in 0..=4u32 {
        for t in 1..=120u64 {
            let p = Plan::new(t, 8, &opts(Checkpointing::Binomial { snapshots: s })).unwrap();
            assert!(
                p.actions.len() as u64 <= BINOMIAL_ACTIONS_PER_STEP * t,
                "{s} {t}"
            );
        }
    }
}

/// `--checkpoint all` kept every state whatever `--checkpoint-memory` said. Now it is held
/// to the budget as `auto` is: accepted exactly when `auto` would choose store-all, else
/// refused before anything runs, naming the option, the bytes it needs and the budget.
#[test]
fn store_all_is_held_to_the_memory_budget() {
    let (steps, bytes) = (400u64, 100u64);
    let with = |policy, memory_budget| CheckpointOptions {
        policy,
        memory_budget,
    };
    let needed = (steps + 1) * bytes;
    for budget in [0, bytes, needed - 1, needed, needed + 1, 1 << 30] {
        let all = Plan::new(steps, bytes, &with(Checkpointing::StoreAll, budget));
        let auto = Plan::new(steps, bytes, &with(Checkpointing::Auto, budget));
        let auto_stores_all = matches!(&auto, Ok(p) if p.policy == Checkpointing::StoreAll);
        assert_eq!(all.is_ok(), auto_stores_all, "budget {budget}");
        assert_eq!(all.is_ok(), needed <= budget, "budget {budget}");
        match all {
            Ok(p) => assert!(p.peak_states * bytes <= budget, "budget {budget}"),
            Err(GradError::Horizon { steps: s, reason }) => {
                assert_eq!(s, steps);
                assert!(reason.contains("--checkpoint-memory"), "{reason}");
                assert!(reason.contains(&format!("{needed} bytes")), "{reason}");
                assert!(reason.contains(&format!("{budget} bytes")), "{reason}");
            }
            Err(e) => panic!("budget {budget}: {e}"),
        }
    }
    // The default budget bounds it too, and the bytes needed are not saturated.
    match Plan::new(u64::MAX, 768, &opts_default(Checkpointing::StoreAll)) {
        Err(GradError::Horizon { reason, .. }) => {
            let exact = (u128::from(u64::MAX) + 1) * 768;
            assert!(reason.contains(&exact.to_string()), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

fn opts_default(policy: Checkpointing) -> CheckpointOptions {
    CheckpointOptions {
        policy,
        ..CheckpointOptions::default()
    }
}

/// Every policy's plan, over horizons around its segment and snapshot boundaries.
fn plans() -> Vec<(u64, Checkpointing)> {
    let mut out = Vec::new();
    for t in [1u64, 2, 3, 7, 16, 17, 60] {
        for policy in crate::grad::fixtures::every_policy() {
            out.push((t, policy));
        }
    }
    out
}

/// `two-level:C` and `binomial:S` ignored the memory budget (two-level:10^6 over 10^6
/// steps kept every state). Now each policy is accepted exactly when the states its plan
/// keeps at once fit: at peak x bytes, refused one byte below, the refusal naming the
/// policy, the states, the bytes, the budget and what to try instead.
#[test]
fn every_policy_is_held_to_the_memory_budget_by_its_peak() {
    let bytes = 100u64;
    let with = |policy, memory_budget| CheckpointOptions {
        policy,
        memory_budget,
    };
    for (t, policy) in plans() {
        let peak = Plan::new(t, bytes, &opts(policy)).unwrap().peak_states;
        let needed = peak * bytes;
        let fits = Plan::new(t, bytes, &with(policy, needed)).unwrap();
        assert_eq!(fits.peak_states, peak);
        match Plan::new(t, bytes, &with(policy, needed - 1)) {
            Err(GradError::Horizon { steps, reason }) => {
                assert_eq!(steps, t);
                let name = match policy {
                    Checkpointing::StoreAll => "all".to_string(),
                    Checkpointing::TwoLevel { interval: None } => "two-level".to_string(),
                    Checkpointing::TwoLevel { interval: Some(c) } => format!("two-level:{c}"),
                    Checkpointing::Binomial { snapshots } => format!("binomial:{snapshots}"),
                    Checkpointing::Auto => unreachable!(),
                };
                for want in [
                    format!("--checkpoint {name} would keep {peak} states of {bytes} bytes"),
                    format!("{needed} bytes"),
                    format!("--checkpoint-memory budget of {} bytes", needed - 1),
                    "--checkpoint auto".to_string(),
                ] {
                    assert!(reason.contains(&want), "{want:?} not in {reason}");
                }
                let advice = match policy {
                    Checkpointing::TwoLevel { interval: Some(_) } => " C,",
                    Checkpointing::Binomial { .. } => "a smaller S",
                    _ => "--checkpoint-memory",
                };
                assert!(reason.contains(advice), "{reason}");
            }
            other => panic!("{t} {policy:?}: {other:?}"),
        }
    }
}

/// The brief's cases: two-level:10^6 over 10^6 steps keeps every state, past the default
/// budget; binomial with far more snapshots than steps keeps what its schedule uses
/// (a slot per step at most), not S + 2, and is accepted; planning it does not loop over S.
#[test]
fn explicit_policies_count_the_states_their_plans_keep() {
    // 10^6 + 1 states of 4 KiB (85 particles on the CPU): 4 GB, past the 1 GiB default.
    let big = Plan::new(
        1_000_000,
        4096,
        &opts_default(Checkpointing::TwoLevel {
            interval: Some(1_000_000),
        }),
    );
    match big {
        Err(GradError::Horizon { reason, .. }) => {
            assert!(reason.contains("1000001 states"), "{reason}");
            assert!(reason.contains("smaller C"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    let huge = Checkpointing::Binomial {
        snapshots: u32::MAX,
    };
    let budget = CheckpointOptions {
        policy: huge,
        memory_budget: 200 * 768,
    };
    let p = Plan::new(100, 768, &budget).unwrap();
    check(&p);
    // A slot per step (0..99), the record and the state after it.
    assert_eq!(p.peak_states, 102);
    // Snapshots past one per step change nothing: the plan of S = T - 1.
    let just = Plan::new(100, 768, &opts(Checkpointing::Binomial { snapshots: 99 })).unwrap();
    assert_eq!(p.actions, just.actions);
    // Over few steps: S = 50 over 10 steps keeps at most 10 slots + 2.
    let few = Plan::new(10, 8, &opts(Checkpointing::Binomial { snapshots: 50 })).unwrap();
    assert!(few.peak_states <= 12, "{}", few.peak_states);
}

/// `auto`'s plans fit the budget they were chosen by, whichever policy it picks.
#[test]
fn auto_fits_its_budget() {
    for t in [1u64, 5, 60, 400] {
        for states in 3..=30u64 {
            let budget = states * 100;
            let o = CheckpointOptions {
                policy: Checkpointing::Auto,
                memory_budget: budget,
            };
            let p = Plan::new(t, 100, &o).unwrap();
            assert!(p.peak_states * 100 <= budget, "{t} {states}: {p:?}");
            check(&p);
        }
    }
}
