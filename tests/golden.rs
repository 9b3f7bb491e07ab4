//! Outputs bit-identical across refactors: short runs and one fit of the built-in scenes,
//! on the CPU reference and the GPU, hashed and compared with `tests/golden/digests.txt`
//! (written by `MSC_GOLDEN_WRITE=1 cargo test --test golden`; first before the host
//! redesign, since then only by a deliberate numerical change whose commit says why).
//!
//! A restructuring must not move one bit of what a user gets. Each case records its exit
//! code, the SHA-256 of its energy log and one digest of its frames, so a rewrite's diff
//! says which of them moved. CPU digests are compared on x86-64 (one binary, fixed
//! summation order: the same bits on every machine of that target); GPU digests where the
//! key of what can change a GPU's rounding ([`gpu_key`]) is the one recorded. Under
//! `MSC_REQUIRE_GPU=1` another key fails the test with the command that rewrites the
//! digests; without it the GPU digests are skipped with a note.

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
    // Damping under the explicit integrators, where the force carries it (the torus has
    // none): c / m = 2 per second takes 5 % of the kinetic energy in the 20 steps (about
    // 3 J of 786 J on the CPU), and h c / m = 0.03 keeps both integrators stable.
    Case {
        id: "torus_damped_symplectic",
        args: &[
            "torus",
            "--set",
            "integrator.method=\"symplectic_euler\"",
            "--set",
            "material.damping=0.2",
        ],
    },
    Case {
        id: "torus_damped_verlet",
        args: &[
            "torus",
            "--set",
            "integrator.method=\"verlet\"",
            "--set",
            "material.damping=0.2",
        ],
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
/// The entry that holds [`gpu_key`] in the digests file.
const KEY: &str = "gpu_key";
/// The command that rewrites the digests (on a machine with an adapter).
const REWRITE: &str =
    "MSC_GOLDEN_WRITE=1 MSC_REQUIRE_GPU=1 cargo test --test golden -- outputs_match_the_recorded_digests";

fn sha(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    format!("{:x}", Sha256::digest(&bytes))
}

/// What one case wrote on one backend, as recorded: `/exit` the exit code, `/energy` the
/// SHA-256 of `energy.csv` (what `sha256sum` prints), `/frames` the SHA-256 over each
/// frame's file name and SHA-256, in name order.
#[derive(Debug, PartialEq)]
struct Outputs {
    exit: i32,
    energy: String,
    frames: String,
}

impl Outputs {
    fn read(exit: i32, dir: &Path) -> Self {
        let mut frames: Vec<PathBuf> = std::fs::read_dir(dir.join("frames"))
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        frames.sort();
        let mut h = Sha256::new();
        for f in &frames {
            h.update(f.file_name().unwrap().to_string_lossy().as_bytes());
            h.update(sha(f).as_bytes());
        }
        Self {
            exit,
            energy: sha(&dir.join("energy.csv")),
            frames: format!("{:x}", h.finalize()),
        }
    }

    /// The entries of the digests file, under `prefix` (`case/backend`).
    fn entries(&self, prefix: &str) -> [(String, String); 3] {
        [
            (format!("{prefix}/exit"), self.exit.to_string()),
            (format!("{prefix}/energy"), self.energy.clone()),
            (format!("{prefix}/frames"), self.frames.clone()),
        ]
    }
}

/// One case's outputs on one backend, or the command's stderr if it failed;
/// `checks`: `MSC_SHADER_CHECKS` ("1": kernels built with naga's runtime checks).
fn case_outputs(case: &Case, backend: &str, work: &Path, checks: &str) -> Result<Outputs, String> {
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
    match o.status.code() {
        Some(code @ (0 | 1)) => Ok(Outputs::read(code, &out)),
        _ => Err(common::stderr(&o)),
    }
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
    // Fields that describe how the fit ran rather than what it computed (a parameter's
    // `log` flag, the gradient's `mode` and `checkpoint`), added after the digests were
    // recorded, stay out of them: the digest follows the numbers only.
    if let Some(params) = kept.get_mut("parameters").and_then(|p| p.as_array_mut()) {
        for p in params.iter_mut().filter_map(|p| p.as_object_mut()) {
            p.remove("log");
        }
    }
    if let Some(g) = kept.get_mut("gradient").and_then(|g| g.as_object_mut()) {
        g.remove("mode");
        g.remove("checkpoint");
    }
    Ok(format!(
        "{:x}",
        Sha256::digest(serde_json::to_string(&kept).unwrap().as_bytes())
    ))
}

/// What can change the GPU digests' rounding: the adapter's name (lavapipe's names the
/// vector width its JIT compiler uses, "256 bits"), backend and driver, and for a software
/// adapter the host's architecture and the vector features that JIT may use (FMA fuses a
/// rounding away; AVX-512 brings other reciprocal and square-root estimates), as the
/// running processor reports them. Not the processor's brand: two processors with the
/// same features run the same JIT code.
fn gpu_key() -> Option<String> {
    let a = common::adapter()?;
    let info = a.get_info();
    let mut key = format!(
        "{} | {:?} | {} {}",
        info.name, info.backend, info.driver, info.driver_info
    );
    if info.device_type == wgpu::DeviceType::Cpu {
        key.push_str(&format!(" | host {}", host_features()));
    }
    Some(key)
}

/// The host architecture and the vector features a JIT compiler may use on it.
fn host_features() -> String {
    #[cfg(target_arch = "x86_64")]
    let features: Vec<&str> = [
        ("fma", std::arch::is_x86_feature_detected!("fma")),
        ("avx2", std::arch::is_x86_feature_detected!("avx2")),
        ("avx512f", std::arch::is_x86_feature_detected!("avx512f")),
    ]
    .into_iter()
    .filter_map(|(name, has)| has.then_some(name))
    .collect();
    #[cfg(not(target_arch = "x86_64"))]
    let features: Vec<&str> = Vec::new();
    let mut s = std::env::consts::ARCH.to_string();
    for f in features {
        s.push(' ');
        s.push_str(f);
    }
    s
}

fn parse_digests(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            l.split_once(' ')
                .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Compares the digests `got` on this machine with those recorded (`want`): `Ok` with a
/// note when a part was not compared, `Err` listing what differs. The GPU entries are
/// compared only when both were taken under the same [`KEY`]; another key skips them with
/// a note, or fails when `require_gpu` (`MSC_REQUIRE_GPU=1`), naming the command that
/// rewrites the file (whose diff then shows whether any digest moved).
fn compare(
    want: &BTreeMap<String, String>,
    got: &BTreeMap<String, String>,
    require_gpu: bool,
) -> Result<Option<String>, String> {
    let mut note = None;
    let same_gpu = want.get(KEY) == got.get(KEY);
    if !same_gpu {
        let why = format!(
            "the GPU digests were written under the key {:?}; this machine's is {:?}",
            want.get(KEY).map_or("none", String::as_str),
            got.get(KEY).map_or("none", String::as_str)
        );
        if require_gpu {
            return Err(format!(
                "{why}. If this machine should round as the recorded one did, rewrite the \
                 digests with\n    {REWRITE}\nand check that `git diff {DIGESTS}` changes \
                 only the {KEY} line; a digest that moves there is a real difference."
            ));
        }
        note = Some(format!("{why}: comparing the CPU digests only"));
    }
    let mut differ = Vec::new();
    for (k, v) in got {
        if k == KEY || (k.contains("/gpu") && !same_gpu) {
            continue;
        }
        if k.contains("/cpu") && !cfg!(target_arch = "x86_64") {
            continue;
        }
        match want.get(k) {
            Some(w) if w == v => {}
            Some(w) => differ.push(format!("{k}: was {w}, now {v}")),
            None => differ.push(format!("{k}: no recorded digest")),
        }
    }
    if differ.is_empty() {
        Ok(note)
    } else {
        Err(format!("outputs changed:\n{}", differ.join("\n")))
    }
}

#[test]
fn outputs_match_the_recorded_digests() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let work = tempfile::tempdir().unwrap();
    let write = std::env::var_os("MSC_GOLDEN_WRITE").is_some();
    let key = gpu_key();
    // Written without an adapter, the file would lose its GPU digests.
    assert!(
        key.is_some() || !write,
        "MSC_GOLDEN_WRITE=1 needs a GPU adapter (lavapipe will do)"
    );
    let mut got = BTreeMap::new();
    got.insert(
        KEY.to_string(),
        key.clone().unwrap_or_else(|| "none".into()),
    );
    let mut backends = vec!["cpu"];
    if key.is_some() {
        backends.push("gpu");
    } else {
        common::skip_no_adapter("the GPU golden digests");
    }
    for backend in &backends {
        for case in cases(backend) {
            let o = case_outputs(case, backend, work.path(), "0")
                .unwrap_or_else(|e| panic!("{} on {backend} failed: {e}", case.id));
            got.extend(o.entries(&format!("{}/{backend}", case.id)));
        }
        let d = fit_digest(backend, work.path(), "0")
            .unwrap_or_else(|e| panic!("fit on {backend} failed: {e}"));
        got.insert(format!("fit_charge/{backend}"), d);
    }

    if write {
        let mut text = String::from(
            "# Digests of each golden case's outputs (tests/golden.rs): <case>/<backend>/exit the exit\n\
             # code, /energy the SHA-256 of energy.csv, /frames one SHA-256 over the frames' names\n\
             # and SHA-256s. Rewrite only for a deliberate numerical change, or for a new gpu_key.\n",
        );
        for (k, v) in &got {
            text.push_str(&format!("{k} {v}\n"));
        }
        std::fs::create_dir_all(root.join("tests/golden")).unwrap();
        std::fs::write(root.join(DIGESTS), text).unwrap();
        return;
    }

    let text = std::fs::read_to_string(root.join(DIGESTS)).unwrap_or_default();
    let want = parse_digests(&text);
    assert!(!want.is_empty(), "{DIGESTS} is missing");
    match compare(&want, &got, common::require_gpu()) {
        Ok(Some(note)) => eprintln!("{note}"),
        Ok(None) => {}
        Err(e) => panic!("{e}"),
    }
}

/// The comparison itself, on made-up digests: another key fails under
/// `MSC_REQUIRE_GPU=1` with the rewrite command and is skipped without it; a moved digest
/// is named by its part.
#[test]
fn a_gpu_key_mismatch_fails_under_require_gpu_and_names_what_moved() {
    let digests = |key: &str, energy: &str| -> BTreeMap<String, String> {
        parse_digests(&format!(
            "gpu_key {key}\ntorus/cpu/exit 0\ntorus/cpu/energy aa\ntorus/cpu/frames bb\n\
             torus/gpu/exit 0\ntorus/gpu/energy {energy}\ntorus/gpu/frames dd\n"
        ))
    };
    let want = digests("lavapipe | host x86_64 fma avx2", "cc");
    let elsewhere = digests("lavapipe | host x86_64 fma avx2 avx512f", "cc");
    let e = compare(&want, &elsewhere, true).unwrap_err();
    assert!(e.contains(REWRITE) && e.contains("avx512f"), "{e}");
    let note = compare(&want, &elsewhere, false).unwrap();
    assert!(note.is_some_and(|n| n.contains("CPU digests only")));
    assert_eq!(compare(&want, &want, true), Ok(None));
    let moved = digests("lavapipe | host x86_64 fma avx2", "ee");
    let e = compare(&want, &moved, true).unwrap_err();
    assert!(e.contains("torus/gpu/energy: was cc, now ee"), "{e}");
    assert!(!e.contains("frames"), "{e}");
}

/// The kernels run as trusted shader modules (no naga runtime checks: index clamps, loop
/// bounding, zeroed workgroup memory); `MSC_SHADER_CHECKS=1` builds them checked. The checks
/// only guard indices the host already keeps in range, so both must give the same bits:
/// every GPU case and the fit, run both ways on this adapter.
///
/// What this can catch: a kernel that reads or writes out of range (a clamp changes what
/// it reads), a loop the bounding cuts short, a read of uninitialized workgroup memory.
/// What it cannot: a wrong formula, which both builds of the same WGSL share; the digests
/// above and the CPU comparisons of `tests/gpu_solver.rs` are what catch those.
#[test]
fn checked_kernels_give_the_same_outputs() {
    if gpu_key().is_none() {
        common::skip_no_adapter("checked against trusted kernels");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let mut differ = Vec::new();
    for case in cases("gpu") {
        let [trusted, checked] = ["0", "1"].map(|c| {
            case_outputs(case, "gpu", work.path(), c)
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
