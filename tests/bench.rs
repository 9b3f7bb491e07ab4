//! `msc bench` end to end: JSON lines, their keys and values, the warm-up by time, the
//! spread of repeated timings and profiled steps, the host/GPU split, the CPU backend,
//! option errors, the --max-seconds cut-off and the adapter-limit skip. GPU tests run on any
//! adapter (lavapipe included); they skip without one unless `MSC_REQUIRE_GPU=1`.

mod common;

use common::{msc, stderr};

use serde_json::Value;

use std::process::Output;

fn lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// True when the command failed only because there is no adapter (test skipped).
fn no_adapter(o: &Output, test: &str) -> bool {
    if o.status.code() == Some(1) && stderr(o).contains("no GPU adapter") {
        assert!(
            std::env::var("MSC_REQUIRE_GPU").as_deref() != Ok("1"),
            "{test}: MSC_REQUIRE_GPU=1 but no adapter: {}",
            stderr(o)
        );
        eprintln!("{test}: skipped, no GPU adapter");
        return true;
    }
    false
}

const REQUIRED: [&str; 33] = [
    "workload",
    "n",
    "springs",
    "charged",
    "steps",
    "repeats",
    "warmup_steps",
    "warmup_ms",
    "warmup_seconds",
    "sweeps",
    "ms_per_step",
    "ms_per_step_min",
    "ms_per_step_max",
    "ms_per_step_samples",
    "host_ms_per_step",
    "host_ms_per_step_min",
    "host_ms_per_step_max",
    "wait_ms_per_step",
    "kernel_ms_per_step",
    "kernel_ms_per_step_min",
    "kernel_ms_per_step_max",
    "sm_clock_mhz_before",
    "sm_clock_mhz_after",
    "sm_clock_max_mhz",
    "interactions_per_second",
    "percent_of_fp32_peak",
    "jacobi_sweep_gb_per_s",
    "percent_of_bandwidth",
    "kernel_times",
    "dispatches_per_step",
    "submissions_per_step",
    "adapter",
    "notes",
];

fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number: {v}"))
}

fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not an integer: {v}"))
}

/// `min <= median <= max` of the spread `key`, `key_min`, `key_max` (all numbers).
fn ordered(v: &Value, key: &str) -> (f64, f64, f64) {
    let (lo, mid, hi) = (
        f(v, &format!("{key}_min")),
        f(v, key),
        f(v, &format!("{key}_max")),
    );
    assert!(
        0.0 <= lo && lo <= mid && mid <= hi,
        "{key}: {lo} {mid} {hi}: {v}"
    );
    (lo, mid, hi)
}

/// The timing fields every measured record has, whatever the backend.
fn check_timing(r: &Value) {
    let repeats = u(r, "repeats") as usize;
    let samples: Vec<f64> = r["ms_per_step_samples"]
        .as_array()
        .unwrap_or_else(|| panic!("ms_per_step_samples: {r}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(samples.len(), repeats, "one sample per repeat: {r}");
    let (lo, median, hi) = ordered(r, "ms_per_step");
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!((sorted[0], sorted[repeats - 1]), (lo, hi));
    assert!(sorted.contains(&median) || repeats.is_multiple_of(2), "{r}");
    // Every repeat's steps are in timed_seconds.
    let timed = f(r, "timed_seconds");
    let sum: f64 = samples.iter().sum::<f64>() * u(r, "steps") as f64 * 1e-3;
    assert!((timed - sum).abs() <= 1e-9 * timed, "{timed} vs {sum}");
    // The warm-up ran at least the asked steps and lasted at least the asked time.
    assert!(f(r, "warmup_seconds") >= f(r, "warmup_ms") * 1e-3, "{r}");
}

/// A null field must be explained by a note naming it or the field it derives from.
fn null_is_explained(v: &Value, key: &str, sources: &[&str]) {
    if v[key].is_null() {
        let notes = v["notes"].as_array().expect("notes");
        let explained = notes.iter().any(|n| {
            let n = n.as_str().unwrap_or("");
            std::iter::once(key)
                .chain(sources.iter().copied())
                .any(|k| n.starts_with(&format!("{k}:")))
        });
        assert!(explained, "{key} is null without a note: {v}");
    }
}

#[test]
fn gpu_bench_emits_one_parseable_line_per_workload_with_sane_values() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        "--sizes",
        "256",
        "--workload",
        "all",
        "--steps",
        "2",
        "--warmup-ms",
        "50",
        "--out",
        "records.jsonl",
    ];
    let o = msc(&args, dir.path());
    if no_adapter(&o, "gpu_bench") {
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = lines(&o);
    assert_eq!(recs.len(), 2, "one line per workload and size");
    // --out holds exactly the stdout lines, and no temp file is left beside it.
    let file = std::fs::read_to_string(dir.path().join("records.jsonl")).unwrap();
    assert_eq!(file, String::from_utf8_lossy(&o.stdout));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["records.jsonl"]);

    for r in &recs {
        for key in REQUIRED {
            assert!(r.get(key).is_some(), "missing {key}: {r}");
        }
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["backend"], "gpu");
        assert_eq!(u(r, "n"), 256);
        assert_eq!(u(r, "steps"), 2);
        assert_eq!(u(r, "repeats"), 5, "the default repeats");
        assert_eq!(f(r, "warmup_ms"), 50.0);
        assert!(u(r, "warmup_steps") >= 1, "at least the default one step");
        assert!(f(r, "ms_per_step") > 0.0);
        assert_eq!(r["finite"], true, "{r}");
        assert!(r["adapter"]["name"].is_string(), "{r}");
        // The host records whole steps into one pass and one submission per batch: at
        // most one submission per step (each repeat's 2 steps fit one batch: 0.5 each).
        let subm = f(r, "submissions_per_step");
        assert!(subm > 0.0 && subm <= 1.0, "{subm}");
        assert_eq!(
            f(r, "compute_passes_per_step"),
            subm,
            "one pass per submission"
        );
        check_timing(r);
        // GPU: the host's recording and submission are part of each block's wall time.
        let (_, host, host_max) = ordered(r, "host_ms_per_step");
        assert!(host <= f(r, "ms_per_step") && host_max <= f(r, "ms_per_step_max"));
        assert!(f(r, "wait_ms_per_step") >= 0.0);
        let timestamps = r["adapter"]["timestamp_queries"] == true;
        assert_eq!(r["kernel_times"].is_array(), timestamps, "{r}");
        null_is_explained(r, "kernel_times", &[]);
        null_is_explained(r, "kernel_ms_per_step", &["kernel_times"]);
        if timestamps {
            assert_eq!(u(r, "profile_steps"), 5, "the default profiled steps");
            ordered(r, "kernel_ms_per_step");
            for k in r["kernel_times"].as_array().unwrap() {
                ordered(k, "ms_per_step");
            }
        }
        // The SM clock: numbers up to the maximum, or null with the reason.
        null_is_explained(r, "sm_clock_mhz_before", &["sm_clock_mhz"]);
        if !r["sm_clock_mhz_before"].is_null() {
            let max = f(r, "sm_clock_max_mhz");
            for key in ["sm_clock_mhz_before", "sm_clock_mhz_after"] {
                assert!(f(r, key) > 0.0 && f(r, key) <= max, "{r}");
            }
        } else if r["adapter"]["name"]
            .as_str()
            .is_some_and(|n| !n.to_lowercase().contains("nvidia"))
        {
            assert!(r["sm_clock_mhz_after"].is_null() && r["sm_clock_max_mhz"].is_null());
        }
        null_is_explained(r, "interactions_per_second", &[]);
        null_is_explained(r, "percent_of_fp32_peak", &["interactions_per_second"]);
        null_is_explained(r, "jacobi_sweep_gb_per_s", &[]);
        null_is_explained(r, "percent_of_bandwidth", &["jacobi_sweep_gb_per_s"]);
    }

    let cloth = &recs[0];
    assert_eq!(cloth["workload"], "cloth");
    // 16 x 16 grid: structural 2 * 15 * 16 = 480, shear 2 * 15 * 15 = 450.
    assert_eq!(u(cloth, "springs"), 930);
    assert_eq!(u(cloth, "charged"), 0);
    assert_eq!(u(cloth, "sweeps"), 20);
    // spring_assemble, external_forces, rhs, 20 sweeps, integrate (no charges: no
    // Coulomb kernels).
    assert_eq!(u(cloth, "dispatches_per_step"), 24);
    assert!(cloth["interactions_per_second"].is_null());
    // Compulsory sweep bytes by hand: 68 B per particle + 32 B per spring + 4 B per slice
    // of 32 rows (the adjacency is sliced: 8 slices), less the two pinned corners (each
    // has 3 springs: no 16 B of b beyond the inverse diagonal row, no degree word, no
    // 3 x 8 B entries; each shares its slice with free rows).
    assert_eq!(
        u(cloth, "jacobi_sweep_bytes"),
        68 * 256 + 32 * 930 + 4 * 8 - 2 * (16 + 4 + 3 * 8)
    );
    if cloth["kernel_times"].is_array() {
        let sweep_ms = f(cloth, "jacobi_sweep_ms");
        let gbs = f(cloth, "jacobi_sweep_gb_per_s");
        let expect = u(cloth, "jacobi_sweep_bytes") as f64 / (sweep_ms * 1e-3) * 1e-9;
        assert!((gbs - expect).abs() <= 1e-9 * expect, "{gbs} vs {expect}");
        let sweeps = cloth["kernel_times"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kernel"] == "jacobi_sweep")
            .expect("jacobi_sweep profiled");
        assert_eq!(f(sweeps, "dispatches_per_step"), 20.0);
    }

    let coulomb = &recs[1];
    assert_eq!(coulomb["workload"], "coulomb");
    assert_eq!(u(coulomb, "springs"), 0);
    assert_eq!(u(coulomb, "charged"), 256);
    assert!(coulomb["sweeps"].is_null());
    // external_forces, coulomb_sources, coulomb_tiled, explicit_step.
    assert_eq!(u(coulomb, "dispatches_per_step"), 4);
    assert_eq!(u(coulomb, "coulomb_interactions_per_eval"), 256 * 256);
    // interactions/s = n^2 / the Coulomb time per evaluation, and TFLOP/s = 20 x that.
    let ips = f(coulomb, "interactions_per_second");
    let per_eval = f(coulomb, "coulomb_ms_per_eval") * 1e-3;
    assert!(per_eval > 0.0);
    let expect = 256.0 * 256.0 / per_eval;
    assert!((ips - expect).abs() <= 1e-9 * expect, "{ips} vs {expect}");
    let tflops = 20.0 * ips * 1e-12;
    assert!((f(coulomb, "tflops") - tflops).abs() <= 1e-9 * tflops);
    let source = coulomb["coulomb_time_source"].as_str().unwrap();
    if source == "whole_step" {
        assert_eq!(per_eval, f(coulomb, "ms_per_step") * 1e-3);
    } else {
        assert_eq!(source, "timestamps");
    }
}

#[test]
fn charged_cloth_reports_the_coulomb_kernels_when_timestamps_exist() {
    let dir = tempfile::tempdir().unwrap();
    let o = msc(
        &[
            "bench",
            "--workload",
            "cloth",
            "--sizes",
            "256",
            "--steps",
            "2",
            "--sweeps",
            "5",
            "--charged-fraction",
            "0.25",
            "--peak-tflops",
            "2",
            "--bandwidth-gbs",
            "10",
            "--quiet",
        ],
        dir.path(),
    );
    if no_adapter(&o, "charged_cloth") {
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).lines().all(|l| !l.starts_with("workload")),
        "--quiet prints no table"
    );
    let r = &lines(&o)[0];
    assert_eq!(u(r, "charged"), 64);
    assert_eq!(u(r, "coulomb_interactions_per_eval"), 64 * 64);
    // 5 sweeps + 4, + coulomb_sources and coulomb_tiled.
    assert_eq!(u(r, "dispatches_per_step"), 11);
    if r["adapter"]["timestamp_queries"] == true {
        assert_eq!(r["coulomb_time_source"], "timestamps");
        assert_eq!(r["peak_source"], "--peak-tflops");
        let pct = f(r, "percent_of_fp32_peak");
        assert!((pct - 100.0 * f(r, "tflops") / 2.0).abs() <= 1e-9 * pct);
        assert_eq!(r["bandwidth_source"], "--bandwidth-gbs");
        let bw = f(r, "percent_of_bandwidth");
        assert!((bw - 100.0 * f(r, "jacobi_sweep_gb_per_s") / 10.0).abs() <= 1e-9 * bw);
    } else {
        assert!(r["interactions_per_second"].is_null());
    }
}

#[test]
fn cpu_backend_runs_the_reference_and_stops_growing_past_max_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let o = msc(
        &[
            "bench",
            "--backend",
            "cpu",
            "--sizes",
            "1024,256",
            "--steps",
            "2",
            "--repeats",
            "3",
            "--warmup",
            "3",
            "--warmup-ms",
            "0",
            "--max-seconds",
            "1e-9",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = lines(&o);
    assert_eq!(recs.len(), 4, "2 workloads x 2 sizes");
    for (r, (workload, n)) in recs.iter().zip([
        ("cloth", 256),
        ("cloth", 1024),
        ("coulomb", 256),
        ("coulomb", 1024),
    ]) {
        assert_eq!(r["workload"], workload);
        assert_eq!(u(r, "n_requested"), n, "sizes run in increasing order");
        assert_eq!(r["backend"], "cpu");
        assert!(r["adapter"].is_null() && r["kernel_times"].is_null());
    }
    // The first size of each workload is measured; it took longer than 1 ns, so the
    // larger one is skipped with the reason.
    for (first, second) in [(&recs[0], &recs[1]), (&recs[2], &recs[3])] {
        assert_eq!(first["status"], "ok", "{first}");
        assert!(f(first, "ms_per_step") > 0.0);
        check_timing(first);
        assert_eq!(u(first, "repeats"), 3);
        // No minimum time: exactly the asked warm-up steps.
        assert_eq!(u(first, "warmup_steps"), 3);
        // The CPU reference computes inside step: no host/GPU split, no GPU clock.
        for key in [
            "host_ms_per_step",
            "wait_ms_per_step",
            "sm_clock_mhz_before",
        ] {
            assert!(first[key].is_null(), "{key}: {first}");
        }
        null_is_explained(first, "host_ms_per_step", &[]);
        null_is_explained(first, "sm_clock_mhz_before", &["sm_clock_mhz"]);
        assert_eq!(first["finite"], true);
        assert_eq!(second["status"], "skipped");
        let why = second["reason"].as_str().unwrap();
        assert!(
            why.contains("--max-seconds") && why.contains("256"),
            "{why}"
        );
        assert!(second["ms_per_step"].is_null());
        assert_eq!(second["ms_per_step_samples"], serde_json::json!([]));
    }
    assert!(
        stderr(&o).contains("stopping at size 256"),
        "{}",
        stderr(&o)
    );
    // The Coulomb workload's rate comes from whole CPU steps.
    let c = &recs[2];
    assert_eq!(c["coulomb_time_source"], "whole_step");
    let expect = 256.0 * 256.0 / (f(c, "ms_per_step") * 1e-3);
    let ips = f(c, "interactions_per_second");
    assert!((ips - expect).abs() <= 1e-9 * expect);
}

/// `--samples auto` resolves the scenes' rule m = round(5.7 sqrt(n)) at each size (the
/// charges are the whole cloud), runs before the counts, and says so in its row.
#[test]
fn ddef_auto_samples_resolve_at_each_size() {
    let dir = tempfile::tempdir().unwrap();
    let args = "bench --backend cpu --workload ddef --sizes 500,2000 --samples 100,auto \
                --steps 1 --warmup 0 --warmup-ms 0 --repeats 1";
    let o = msc(&args.split_whitespace().collect::<Vec<_>>(), dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let got: Vec<(u64, u64, bool)> = lines(&o)
        .iter()
        .map(|r| {
            (
                u(r, "n"),
                u(r, "ddef_samples"),
                r["ddef_samples_auto"] == true,
            )
        })
        .collect();
    // 5.7 sqrt(500) = 127.5, 5.7 sqrt(2000) = 254.9.
    let want = [
        (500, 127, true),
        (500, 100, false),
        (2000, 255, true),
        (2000, 100, false),
    ];
    assert_eq!(got, want);
}

#[test]
fn ddef_rows_report_time_error_and_rebuilds_per_size_and_sample_count() {
    let dir = tempfile::tempdir().unwrap();
    let o = msc(
        &[
            "bench",
            "--backend",
            "cpu",
            "--workload",
            "ddef",
            "--sizes",
            "2000",
            "--samples",
            "2000,100",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--warmup-ms",
            "0",
            "--repeats",
            "1",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = lines(&o);
    assert_eq!(recs.len(), 2, "one row per sample count");
    for (r, m) in recs.iter().zip([100u64, 2000]) {
        assert_eq!(r["workload"], "ddef");
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(u(r, "ddef_samples"), m, "samples run in increasing order");
        assert_eq!(u(r, "ddef_rebuild_every"), 1);
        assert_eq!(r["ddef_variant"], "corrected", "the default variant");
        // The option's value: the CPU backend runs no gather shape.
        assert_eq!(r["ddef_gather"], "auto", "the default choice");
        assert!(r["ddef_gather_auto"].is_null(), "{r}");
        assert_eq!(r["ddef_far"], "staged", "the default shape");
        // The lattice is planned once and followed at every evaluation: 3 evaluations
        // (1 warm-up + 2 timed) in which the cloud cannot drift from its plan.
        assert_eq!(u(r, "ddef_rebuilds"), 1, "{r}");
        assert!(f(r, "coulomb_ms_per_eval") > 0.0);
        assert_eq!(r["coulomb_time_source"], "whole_step");
        assert!(r["interactions_per_second"].is_null());
        null_is_explained(r, "interactions_per_second", &[]);
        // Every charge is a test target at n = 2000 <= 1000 x 2 strided.
        assert_eq!(u(r, "force_error_targets"), 1000);
    }
    // The bound at n = m = 2000 (set for random charges; paper Table 1: 0.046 to
    // 0.059) holds on this cloud too; the coarse grid must still approximate (< 100%).
    let (coarse, fine) = (
        f(&recs[0], "force_error_mean"),
        f(&recs[1], "force_error_mean"),
    );
    assert!(fine > 0.0 && fine <= 0.06, "m = 2000: {fine}");
    assert!(coarse > 0.0 && coarse < 1.0, "m = 100: {coarse}");
    assert!(f(&recs[1], "force_error_max") >= fine);
}

/// `--ddef-variant paper` runs Algorithm 1 as printed: the record says so, and its
/// forces are not the `corrected` ones (the force error against all-pairs differs).
#[test]
fn ddef_rows_run_the_variant_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let run = |variant: &str| {
        let args = format!(
            "bench --backend cpu --workload ddef --sizes 2000 --samples 100 --steps 1 \
             --warmup 0 --warmup-ms 0 --repeats 1 --ddef-variant {variant}"
        );
        let o = msc(&args.split_whitespace().collect::<Vec<_>>(), dir.path());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let recs = lines(&o);
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0]["status"], "ok", "{}", recs[0]);
        assert_eq!(recs[0]["ddef_variant"], variant);
        f(&recs[0], "force_error_mean")
    };
    let (paper, corrected) = (run("paper"), run("corrected"));
    assert!(
        paper > 0.0 && corrected > 0.0 && paper != corrected,
        "{paper} {corrected}"
    );
}

/// `--cloud` puts the Coulomb and DDEF workloads' charges on a surface: the records say
/// which, the sphere's DDEF error is not the cube's (other positions) and its busiest
/// cell holds more charges (the same count on a surface), and the cloth row has no cloud
/// (a shape that is none: `bad_option_values_exit_2_naming_the_option`).
#[test]
fn coulomb_and_ddef_rows_run_the_cloud_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let run = |workload: &str, cloud: &str| {
        // (--samples only where a workload reads it: `an_option_no_workload_run_reads_...`)
        let samples = if workload == "ddef" {
            "--samples 100"
        } else {
            ""
        };
        let args = format!(
            "bench --backend cpu --workload {workload} --sizes 1500 {samples} --steps 1 \
             --warmup 0 --warmup-ms 0 --repeats 1 --cloud {cloud}"
        );
        let o = msc(&args.split_whitespace().collect::<Vec<_>>(), dir.path());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let recs = lines(&o);
        assert!(!recs.is_empty());
        recs
    };
    let ddef = |cloud: &str| {
        let recs = run("ddef", cloud);
        assert_eq!(recs.len(), 1);
        let r = &recs[0];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["cloud"], cloud);
        let near = f(r, "ddef_near_per_target");
        assert!((1.0..=1500.0).contains(&near), "{r}");
        (f(r, "force_error_mean"), u(r, "ddef_busiest_cell"))
    };
    let ((cube, cube_cell), (sphere, sphere_cell)) = (ddef("cube"), ddef("sphere"));
    assert!(
        cube > 0.0 && sphere > 0.0 && cube != sphere,
        "{cube} {sphere}"
    );
    assert!(
        cube_cell >= 1 && sphere_cell > cube_cell,
        "{cube_cell} {sphere_cell}"
    );
    for r in run("all", "torus") {
        let want = if r["workload"] == "coulomb" {
            "torus"
        } else {
            "null"
        };
        assert_eq!(r["cloud"].to_string().trim_matches('"'), want, "{r}");
    }
}

#[test]
fn gpu_ddef_rows_measure_the_same_error_as_the_cpu_reference() {
    let dir = tempfile::tempdir().unwrap();
    let args = |backend: &'static str| {
        [
            "bench",
            "--backend",
            backend,
            "--workload",
            "ddef",
            "--sizes",
            "1500",
            "--samples",
            "300",
            "--steps",
            "2",
            "--warmup",
            "0",
            "--warmup-ms",
            "0",
            "--repeats",
            "1",
        ]
    };
    let gpu = msc(&args("gpu"), dir.path());
    if no_adapter(&gpu, "gpu_ddef_rows") {
        return;
    }
    assert_eq!(gpu.status.code(), Some(0), "{}", stderr(&gpu));
    let cpu = msc(&args("cpu"), dir.path());
    assert_eq!(cpu.status.code(), Some(0), "{}", stderr(&cpu));
    let (g, c) = (&lines(&gpu)[0], &lines(&cpu)[0]);
    assert_eq!(g["status"], "ok", "{g}");
    assert_eq!(g["backend"], "gpu");
    // One plan, followed at every evaluation, on both backends.
    assert_eq!(u(g, "ddef_rebuilds"), 1);
    assert_eq!(u(c, "ddef_rebuilds"), 1);
    null_is_explained(g, "kernel_times", &[]);
    // Every stage on the device: recorded steps like all-pairs ones (a host/GPU split,
    // at most one submission per step), no host stage, and structures within one binding.
    assert!(f(g, "host_ms_per_step") >= 0.0, "{g}");
    assert!(f(g, "submissions_per_step") <= 1.0, "{g}");
    assert_eq!(f(g, "ddef_host_ms_per_eval"), 0.0, "{g}");
    // The gather's shape that ran, which `auto` (the default) picked.
    assert_eq!(g["ddef_gather_auto"], true, "{g}");
    let shape = g["ddef_gather"].as_str().unwrap_or_default();
    assert!(
        ["cell/128/unrolled", "cell/256/unrolled"].contains(&shape),
        "{g}"
    );
    assert!(
        c["ddef_host_ms_per_eval"].is_null(),
        "the CPU backend has no host stage"
    );
    let (total, largest) = (
        u(g, "ddef_structure_bytes"),
        u(g, "ddef_largest_binding_bytes"),
    );
    assert!(
        0 < largest && largest <= total && largest <= 128 << 20,
        "{g}"
    );
    // Same plan; only f32 against f64 arithmetic (and a charge within rounding of a
    // face) differs. The DDEF error is about 5e-2 and the f32 force error about 1e-6 of
    // the largest force, so the two means agree far within 1e-3 relative (a wrong
    // stencil or weight would move it ~100%).
    let (eg, ec) = (f(g, "force_error_mean"), f(c, "force_error_mean"));
    assert!(ec > 1e-3, "{ec}");
    assert!((eg - ec).abs() <= 1e-3 * ec, "gpu {eg} cpu {ec}");
}

#[test]
fn gpu_warm_up_lasts_the_asked_time_and_repeats_and_profiles_give_ordered_spreads() {
    let dir = tempfile::tempdir().unwrap();
    let o = msc(
        &[
            "bench",
            "--workload",
            "coulomb",
            "--sizes",
            "256",
            "--steps",
            "3",
            "--repeats",
            "4",
            "--warmup",
            "2",
            "--warmup-ms",
            "300",
            "--profile-steps",
            "3",
            "--quiet",
        ],
        dir.path(),
    );
    if no_adapter(&o, "gpu_warm_up") {
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &lines(&o)[0];
    assert_eq!(r["status"], "ok", "{r}");
    assert_eq!((u(r, "steps"), u(r, "repeats")), (3, 4));
    check_timing(r);
    assert!(f(r, "warmup_seconds") >= 0.3, "{r}");
    assert!(u(r, "warmup_steps") >= 2, "{r}");
    // 4 repeats of 3 steps, one submission each.
    assert_eq!(f(r, "submissions_per_step"), 1.0 / 3.0);
    // Per repeat, host time <= wall time, so the order statistics keep that order.
    let (hlo, hmid, hhi) = ordered(r, "host_ms_per_step");
    assert!(hlo <= f(r, "ms_per_step_min") + 1e-12, "{r}");
    assert!(
        hmid <= f(r, "ms_per_step") && hhi <= f(r, "ms_per_step_max"),
        "{r}"
    );
    if r["adapter"]["timestamp_queries"] == true {
        assert_eq!(u(r, "profile_steps"), 3);
        let kernels = r["kernel_times"].as_array().unwrap();
        let names: Vec<&str> = kernels
            .iter()
            .map(|k| k["kernel"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "external_forces",
                "coulomb_sources",
                "coulomb_tiled",
                "explicit_step"
            ]
        );
        let mut median_sum = 0.0;
        for k in kernels {
            assert_eq!(f(k, "dispatches_per_step"), 1.0, "{k}");
            let (_, mid, _) = ordered(k, "ms_per_step");
            assert!((f(k, "us_per_dispatch") - mid * 1e3).abs() <= 1e-9 * mid * 1e3);
            median_sum += mid;
        }
        // A step's kernel total lies within the sums of the kernels' extremes.
        let (lo, _, hi) = ordered(r, "kernel_ms_per_step");
        let sum = |key: &str| kernels.iter().map(|k| f(k, key)).sum::<f64>();
        assert!(lo >= sum("ms_per_step_min") * (1.0 - 1e-12), "{r}");
        assert!(hi <= sum("ms_per_step_max") * (1.0 + 1e-12), "{r}");
        assert!(median_sum > 0.0);
    }
}

#[test]
fn bad_option_values_exit_2_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    for (args, option) in [
        (&["--sweeps", "0"][..], "--sweeps"),
        (&["--steps", "x"][..], "--steps"),
        (&["--sizes", "1K,3"][..], "--sizes"),
        (&["--sizes", "12Q"][..], "--sizes"),
        (&["--charged-fraction", "1.5"][..], "--charged-fraction"),
        (&["--peak-tflops", "0"][..], "--peak-tflops"),
        (&["--charged-fraction", "-0.1"][..], "--charged-fraction"),
        (&["--bandwidth-gbs", "fast"][..], "--bandwidth-gbs"),
        (&["--max-seconds", "-1"][..], "--max-seconds"),
        (&["--workload", "fluid"][..], "--workload"),
        (&["--backend", "tpu"][..], "--backend"),
        (&["--samples", "0"][..], "--samples"),
        (&["--samples", "1000,many"][..], "--samples"),
        (&["--rebuild-every", "0"][..], "--rebuild-every"),
        (&["--repeats", "0"][..], "--repeats"),
        (&["--warmup-ms", "-1"][..], "--warmup-ms"),
        (&["--warmup-ms", "nan"][..], "--warmup-ms"),
        // The choices are named.
        (&["--ddef-variant", "text"][..], "one of paper, corrected"),
        (
            &["--cloud", "cone"][..],
            "one of cube, sphere, torus, sheet",
        ),
        (&["--cloud", "cone"][..], "--cloud"),
    ] {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        let o = msc(&all, dir.path());
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(option), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}");
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn an_option_no_workload_run_reads_is_a_usage_error_naming_it_and_its_readers() {
    let dir = tempfile::tempdir().unwrap();
    // (arguments, the option, its readers, what runs instead): nothing starts, so no
    // adapter is needed.
    for (args, option, readers, runs) in [
        (
            &["--workload", "cloth", "--cloud", "sphere"][..],
            "--cloud",
            "coulomb and ddef",
            "the cloth workload",
        ),
        (
            &["--samples", "500"][..],
            "--samples",
            "ddef workload and a charged adjoint",
            "the cloth and coulomb workloads",
        ),
        (
            &["--workload", "adjoint", "--samples", "500"][..],
            "--samples",
            "charged adjoint",
            "the adjoint workload",
        ),
        (
            &["--workload", "coulomb", "--ddef-far", "direct/2"][..],
            "--ddef-far",
            "ddef workload on the GPU",
            "the coulomb workload",
        ),
        (
            &[
                "--backend",
                "cpu",
                "--workload",
                "ddef",
                "--ddef-gather",
                "cell/128",
            ][..],
            "--ddef-gather",
            "GPU backend",
            "on the CPU backend",
        ),
        (
            &["--workload", "ddef", "--sweeps", "5"][..],
            "--sweeps",
            "cloth, worlds, mesh and adjoint",
            "the ddef workload",
        ),
        (
            &["--workload", "worlds", "--checkpoint", "all"][..],
            "--checkpoint",
            "adjoint",
            "the worlds workload",
        ),
        (
            &["--workload", "adjoint", "--rebuild-every", "3"][..],
            "--rebuild-every",
            "ddef",
            "the adjoint workload",
        ),
        (
            &["--workload", "coulomb", "--worlds", "4"][..],
            "--worlds",
            "worlds",
            "the coulomb workload",
        ),
    ] {
        let mut all = vec!["bench", "--sizes", "4K", "-q"];
        all.extend_from_slice(args);
        let o = msc(&all, dir.path());
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        for part in [option, readers, runs] {
            assert!(e.contains(part), "{args:?} should name '{part}': {e}");
        }
        assert!(o.stdout.is_empty(), "{args:?}: nothing ran");
    }
    // The same values where a workload reads them, and a default given where none does,
    // are accepted (the CPU backend's smallest runs).
    for args in [
        &["--workload", "cloth", "--cloud", "cube", "--sweeps", "2"][..],
        &["--workload", "coulomb", "--cloud", "sphere"][..],
    ] {
        let mut all = vec!["bench", "--backend", "cpu", "--sizes", "16", "--steps", "1"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--warmup", "0", "--warmup-ms", "0", "--repeats", "1", "-q"]);
        let o = msc(&all, dir.path());
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_size_beyond_the_adapter_limits_is_a_skipped_record_not_a_crash() {
    // A 1025 x 1025 cloth: 2 * 1024 * 1025 + 2 * 1024^2 springs, 32 B of spring blocks
    // each. Only meaningful where every adapter's binding limit is below that (lavapipe's
    // 128 MiB is); a larger GPU would simply run it.
    let springs: u64 = 2 * 1024 * 1025 + 2 * 1024 * 1024;
    let need = 32 * springs;
    let adapters = msc::gpu::list_adapters();
    if adapters.is_empty() {
        assert!(!common::require_gpu(), "MSC_REQUIRE_GPU=1 but no adapter");
        eprintln!("skipped: no GPU adapter");
        return;
    }
    if adapters
        .iter()
        .any(|a| a.max_storage_buffer_binding_size >= need)
    {
        // An adapter that runs the size has nothing to refuse.
        common::skip_missing_feature(
            "the size beyond the adapter limits",
            &format!("a max_storage_buffer_binding_size below {need} B"),
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = msc(
        &[
            "bench",
            "--workload",
            "cloth",
            "--sizes",
            "1050625",
            "--steps",
            "1",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &lines(&o)[0];
    assert_eq!(r["status"], "skipped", "{r}");
    assert_eq!(u(r, "n"), 1_050_625);
    let why = r["reason"].as_str().unwrap();
    assert!(
        why.contains("spring blocks") && why.contains(&need.to_string()),
        "{why}"
    );
    assert!(r["ms_per_step"].is_null());
}

#[test]
fn worlds_workload_times_batched_and_sequential_worlds_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "bench",
        "--workload",
        "worlds",
        "--worlds",
        "2,1",
        "--steps",
        "2",
        "--repeats",
        "3",
        "--warmup-ms",
        "0",
    ];
    let o = msc(&args, dir.path());
    if no_adapter(&o, "worlds_bench") {
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let recs = lines(&o);
    // One row per world scene and W, W increasing within each scene.
    let rows: Vec<(String, u64)> = recs
        .iter()
        .map(|r| {
            (
                r["world_scene"].as_str().unwrap().to_string(),
                u(r, "worlds"),
            )
        })
        .collect();
    let want = [("torus", 1), ("torus", 2), ("cloth", 1), ("cloth", 2)];
    assert_eq!(
        rows,
        want.map(|(s, w)| (s.to_string(), w)).to_vec(),
        "{recs:?}"
    );
    for r in &recs {
        assert_eq!(r["workload"], "worlds");
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["finite"], true, "{r}");
        let n = if r["world_scene"] == "torus" {
            145
        } else {
            144
        };
        assert_eq!(u(r, "n"), n, "one world's particles");
        assert!(u(r, "batches") >= 1);
        check_timing(r);
        let w = u(r, "worlds") as f64;
        let seq: Vec<f64> = r["sequential_ms_per_step_samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(seq.len(), 3, "one sequential sample per repeat: {r}");
        ordered(r, "sequential_ms_per_step");
        // The rates and the ratio are those of the medians.
        let b = f(r, "world_steps_per_second");
        let s = f(r, "sequential_world_steps_per_second");
        assert!((b - w * 1e3 / f(r, "ms_per_step")).abs() <= 1e-9 * b, "{r}");
        assert!((s - w * 1e3 / f(r, "sequential_ms_per_step")).abs() <= 1e-9 * s);
        assert!((f(r, "batch_speedup") - b / s).abs() <= 1e-12 * (b / s));
        for key in [
            "kernel_times",
            "host_ms_per_step",
            "interactions_per_second",
        ] {
            null_is_explained(r, key, &[]);
        }
    }
    let table = stderr(&o);
    assert!(table.contains("worlds torus"), "{table}");
    assert!(table.contains("world-steps/s batched"), "{table}");
}

/// A size this machine's memory cannot hold is refused before anything is allocated:
/// exit 2 naming the workload, the size and the bytes, on either backend. Before, the
/// Coulomb cloud allocated its arrays first and the failed allocation aborted the process
/// (SIGABRT, "memory allocation of ... bytes failed").
#[test]
fn a_size_beyond_the_host_memory_is_an_error_naming_it_not_an_abort() {
    let n: usize = 2047 << 20;
    let need = msc::bench::workload::host_bytes(msc::bench::Workload::Coulomb, n).unwrap();
    match msc::scene::available_memory() {
        Some(a) if a < need => {}
        other => {
            // Unknown memory is not checked; a machine this large would run the size.
            eprintln!("skipped: {other:?} bytes available, the size needs {need}");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    for (workload, backend) in [
        ("coulomb", "cpu"),
        ("coulomb", "gpu"),
        ("ddef", "cpu"),
        ("cloth", "cpu"),
    ] {
        let o = msc(
            &[
                "bench",
                "--workload",
                workload,
                "--sizes",
                "1K,2047M",
                "--backend",
                backend,
                "--quiet",
            ],
            dir.path(),
        );
        let err = stderr(&o);
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(o.status.signal(), None, "{workload} {backend}: {err}");
        }
        assert_eq!(o.status.code(), Some(2), "{workload} {backend}: {err}");
        for part in [
            "--sizes",
            &format!("the {workload} workload"),
            &n.to_string(),
            "bytes",
            "MemAvailable",
        ] {
            assert!(err.contains(part), "{workload} {backend}: {part}: {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
        // Refused before any row ran: the 1K row is not measured either.
        assert!(o.stdout.is_empty(), "{workload} {backend}");
    }
}
