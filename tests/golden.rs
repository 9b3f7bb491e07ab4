//! Outputs bit-identical across refactors: short runs and one fit of the built-in scenes,
//! on the CPU reference and the GPU, hashed and compared with `tests/golden/digests.txt`
//! (written by `MSC_GOLDEN_WRITE=1 cargo test --test golden`; first before the host
//! redesign, since then only by a deliberate numerical change whose commit says why).
//!
//! A restructuring must not move one bit of what a user gets. CPU digests are compared on
//! x86-64 (one binary, fixed summation order: the same bits on every machine of that
//! target); GPU digests only on the adapter driver that wrote them (a software driver also
//! on the same processor features), since another may legitimately round differently.

mod common;

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One golden case: a scene, its overrides and the command that runs it.
struct Case {
    id: &'static str,
    args: &'static [&'static str],
}

/// Every integrator, solver and Coulomb method the scenes reach, kept short (20 steps).
const RUNS: &[Case] = &[
    Case {
        id: "torus",
        args: &["torus"],
    },
    Case {
        id: "torus_cg",
        args: &["torus", "--set", "integrator.solver.method=\"cg\""],
    },
    Case {
        id: "torus_block_jacobi",
        args: &[
            "torus",
            "--set",
            "integrator.solver.method=\"block_jacobi\"",
        ],
    },
    Case {
        id: "torus_chebyshev",
        args: &["torus", "--set", "integrator.solver.method=\"chebyshev\""],
    },
    Case {
        id: "torus_local_global",
        args: &["torus", "--set", "integrator.method=\"local_global\""],
    },
    Case {
        id: "torus_verlet",
        args: &["torus", "--set", "integrator.method=\"verlet\""],
    },
    Case {
        id: "torus_symplectic",
        args: &["torus", "--set", "integrator.method=\"symplectic_euler\""],
    },
    Case {
        id: "torus_ddef",
        args: &["torus", "--set", "coulomb.method=\"ddef\""],
    },
    Case {
        id: "torus_ddef_delaunay",
        args: &[
            "torus",
            "--set",
            "coulomb.method=\"ddef\"",
            "--set",
            "coulomb.ddef_grid=\"delaunay\"",
        ],
    },
    Case {
        id: "torus_ddef_paper",
        args: &[
            "torus",
            "--set",
            "coulomb.method=\"ddef\"",
            "--set",
            "coulomb.ddef_variant=\"paper\"",
        ],
    },
    Case {
        id: "swirl_ddef",
        args: &["swirl", "--set", "coulomb.method=\"ddef\""],
    },
    Case {
        id: "cloth_ddef",
        args: &[
            "cloth",
            "--set",
            "coulomb.method=\"ddef\"",
            "--set",
            "material.charge=1e-7",
        ],
    },
    Case {
        id: "torus_softened",
        args: &["torus", "--set", "coulomb.softening=0.05"],
    },
    Case {
        id: "torus_dt015",
        args: &["torus_dt015"],
    },
    Case {
        id: "torus_orbit",
        args: &["torus_orbit"],
    },
    Case {
        id: "swirl",
        args: &["swirl"],
    },
    Case {
        id: "cloth",
        args: &["cloth"],
    },
];

/// Cases the GPU refuses (the Delaunay grid is a CPU feature): CPU digests only.
const CPU_ONLY: &[&str] = &["torus_ddef_delaunay"];

/// The cases `backend` runs.
fn cases(backend: &str) -> impl Iterator<Item = &'static Case> + '_ {
    RUNS.iter()
        .filter(move |c| backend == "cpu" || !CPU_ONLY.contains(&c.id))
}

const STEPS: &str = "20";
const DIGESTS: &str = "tests/golden/digests.txt";

fn sha(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    format!("{:x}", Sha256::digest(&bytes))
}

/// energy.csv and every frame of a run folder, in name order.
fn run_outputs(dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![dir.join("energy.csv")];
    let mut frames: Vec<PathBuf> = std::fs::read_dir(dir.join("frames"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    frames.sort();
    files.extend(frames);
    files
}

/// Digest of one case's outputs on one backend, or the command's stderr if it failed;
/// `checks`: `MSC_SHADER_CHECKS` ("1": kernels built with naga's runtime checks).
fn case_digest(case: &Case, backend: &str, work: &Path, checks: &str) -> Result<String, String> {
    let out = work.join(format!("{}_{backend}_{checks}", case.id));
    let mut args: Vec<&str> = vec!["run"];
    args.extend_from_slice(case.args);
    let out_s = out.to_string_lossy().to_string();
    args.extend_from_slice(&[
        "--steps",
        STEPS,
        "--set",
        "output.every=5",
        "--backend",
        backend,
        "--quiet",
        "--out",
        &out_s,
    ]);
    let o = common::msc_with(&args, work, &[("MSC_SHADER_CHECKS", checks)]);
    // A diverged run (torus_dt015 with some methods) is an outcome too: exit 1 with outputs.
    if !matches!(o.status.code(), Some(0) | Some(1)) {
        return Err(common::stderr(&o));
    }
    let mut h = Sha256::new();
    h.update(format!("exit={:?};", o.status.code()));
    for f in run_outputs(&out) {
        h.update(f.file_name().unwrap().to_string_lossy().as_bytes());
        h.update(sha(&f).as_bytes());
    }
    Ok(format!("{:x}", h.finalize()))
}

/// A short fit of the torus charge from a run at another charge, the target made by the
/// same backend so each backend's digest depends on that backend alone: the gradients' bits.
fn fit_digest(backend: &str, work: &Path, checks: &str) -> Result<String, String> {
    let env = [("MSC_SHADER_CHECKS", checks)];
    let target = work.join(format!("fit_target_{backend}_{checks}"));
    let t = target.to_string_lossy().to_string();
    let o = common::msc_with(
        &[
            "run",
            "torus",
            "--steps",
            STEPS,
            "--set",
            "output.every=5",
            "--set",
            "material.charge=7e-6",
        ]
        .iter()
        .copied()
        .chain(["--backend", backend, "--quiet", "--out", &t])
        .collect::<Vec<_>>(),
        work,
        &env,
    );
    if !o.status.success() {
        return Err(common::stderr(&o));
    }
    let out = work.join(format!("fit_{backend}_{checks}"));
    let out_s = out.to_string_lossy().to_string();
    let o = common::msc_with(
        &[
            "fit",
            "torus",
            "--set",
            "integrator.duration=0.3",
            "--set",
            "output.every=5",
            "--target",
            &t,
            "--param",
            "charge",
            "--max-iters",
            "3",
            "--backend",
            backend,
            "--quiet",
            "--out",
            &out_s,
        ],
        work,
        &env,
    );
    if !o.status.success() {
        return Err(common::stderr(&o));
    }
    // fit.json holds timings too: hash only its numeric trajectory fields.
    let v = common::read_json(&out.join("fit.json"));
    let mut kept = BTreeMap::new();
    for key in [
        "parameters",
        "history",
        "frames",
        "initial_loss",
        "loss",
        "rms_error",
        "iterations",
        "gradient",
    ] {
        if let Some(x) = v.get(key) {
            kept.insert(key, x.clone());
        }
    }
    Ok(format!(
        "{:x}",
        Sha256::digest(serde_json::to_string(&kept).unwrap().as_bytes())
    ))
}

/// The adapter and driver; for a software adapter also the host processor and the vector
/// features its JIT compiler may use, since those can change its rounding too.
fn gpu_driver() -> Option<String> {
    let a = common::adapter()?;
    let info = a.get_info();
    let mut key = format!("{} {}", info.name, info.driver_info);
    if info.device_type == wgpu::DeviceType::Cpu {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |name: &str| {
            cpuinfo
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        let flags = field("flags");
        let features: Vec<&str> = ["fma", "avx2", "avx512f"]
            .into_iter()
            .filter(|f| flags.split_whitespace().any(|x| x == *f))
            .collect();
        key.push_str(&format!(
            " on {} [{}]",
            field("model name"),
            features.join(" ")
        ));
    }
    Some(key)
}

fn load_digests(root: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(root.join(DIGESTS)).unwrap_or_default();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            l.split_once(' ')
                .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

#[test]
fn outputs_match_the_recorded_digests() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let driver = gpu_driver();
    let mut got = BTreeMap::new();
    got.insert(
        "gpu_driver".to_string(),
        driver.clone().unwrap_or_else(|| "none".into()),
    );
    let mut backends = vec!["cpu"];
    if driver.is_some() {
        backends.push("gpu");
    } else {
        common::skip_no_adapter("the GPU golden digests");
    }
    for backend in &backends {
        for case in cases(backend) {
            let d = case_digest(case, backend, work.path(), "0")
                .unwrap_or_else(|e| panic!("{} on {backend} failed: {e}", case.id));
            got.insert(format!("{}/{backend}", case.id), d);
        }
        let d = fit_digest(backend, work.path(), "0")
            .unwrap_or_else(|e| panic!("fit on {backend} failed: {e}"));
        got.insert(format!("fit_charge/{backend}"), d);
    }

    if std::env::var_os("MSC_GOLDEN_WRITE").is_some() {
        let mut text = String::from(
            "# SHA-256 of each case's outputs (tests/golden.rs); rewrite only for a deliberate numerical change.\n",
        );
        for (k, v) in &got {
            text.push_str(&format!("{k} {v}\n"));
        }
        std::fs::create_dir_all(root.join("tests/golden")).unwrap();
        std::fs::write(root.join(DIGESTS), text).unwrap();
        return;
    }

    let want = load_digests(&root);
    assert!(!want.is_empty(), "{DIGESTS} is missing");
    let same_gpu = want.get("gpu_driver") == got.get("gpu_driver");
    if !same_gpu {
        eprintln!(
            "GPU digests were written on {:?}; this adapter is {:?}: comparing CPU digests only",
            want.get("gpu_driver"),
            got.get("gpu_driver")
        );
    }
    let mut differ = Vec::new();
    for (k, v) in &got {
        if k == "gpu_driver" || (k.ends_with("/gpu") && !same_gpu) {
            continue;
        }
        if k.ends_with("/cpu") && !cfg!(target_arch = "x86_64") {
            continue;
        }
        match want.get(k) {
            Some(w) if w == v => {}
            Some(w) => differ.push(format!("{k}: was {w}, now {v}")),
            None => differ.push(format!("{k}: no recorded digest")),
        }
    }
    assert!(differ.is_empty(), "outputs changed:\n{}", differ.join("\n"));
}

/// The kernels run as trusted shader modules (no naga runtime checks: index clamps, loop
/// bounding, zeroed workgroup memory); `MSC_SHADER_CHECKS=1` builds them checked. The checks
/// only guard indices the host already keeps in range, so both must give the same bits:
/// every GPU case and the fit, run both ways on this adapter.
#[test]
fn checked_kernels_give_the_same_outputs() {
    if gpu_driver().is_none() {
        common::skip_no_adapter("checked against trusted kernels");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let mut differ = Vec::new();
    for case in cases("gpu") {
        let [trusted, checked] = ["0", "1"].map(|c| {
            case_digest(case, "gpu", work.path(), c)
                .unwrap_or_else(|e| panic!("{} (MSC_SHADER_CHECKS={c}) failed: {e}", case.id))
        });
        if trusted != checked {
            differ.push(case.id);
        }
    }
    let [trusted, checked] = ["0", "1"].map(|c| {
        fit_digest("gpu", work.path(), c)
            .unwrap_or_else(|e| panic!("fit (MSC_SHADER_CHECKS={c}) failed: {e}"))
    });
    if trusted != checked {
        differ.push("fit_charge");
    }
    assert!(differ.is_empty(), "checked kernels changed {differ:?}");
}
