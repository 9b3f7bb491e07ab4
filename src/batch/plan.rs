//! What a batch runs: the cartesian product of a sweep's `--vary` values, or the list of a
//! manifest file. Each run gets a folder name that is readable and safe on every file
//! system.

use super::BatchError;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// One run of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpec {
    /// The run's folder under the batch's output folder.
    pub name: String,
    /// A scene file path or a built-in scene name, as `msc run` takes it.
    pub scene: String,
    /// `--set` overrides, applied in order (later ones win).
    pub set: Vec<String>,
    /// The values of [`Plan::columns`] for this run, for `runs.csv`.
    pub columns: Vec<String>,
}

/// The runs of a batch, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The columns `runs.csv` gives for each run before the results: the varied keys of a
    /// sweep, or `scene` and `set` for a manifest.
    pub columns: Vec<String>,
    pub runs: Vec<RunSpec>,
}

/// One `--vary KEY=V1,V2,...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vary {
    pub key: String,
    /// TOML values, as `--set` takes them.
    pub values: Vec<String>,
}

impl Vary {
    /// Parses `key=v1,v2,...`. Commas inside brackets, braces or quotes belong to a value
    /// (`mesh.resolution=[8, 8],[16, 16]` has two values).
    pub fn parse(arg: &str) -> Result<Self, BatchError> {
        let err = |message: String| BatchError::Vary {
            arg: arg.to_string(),
            message,
        };
        let (key, raw) = arg
            .split_once('=')
            .ok_or_else(|| err("expected KEY=V1,V2,..., e.g. integrator.dt=0.01,0.02".into()))?;
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(err(format!("'{key}' is not a dotted scene key")));
        }
        let values = split_values(raw).map_err(err)?;
        // Compared as the scene reads them: `0.01` and `1e-2` would run one scene twice.
        let mut seen: Vec<(&str, Option<toml::Value>)> = Vec::new();
        for v in &values {
            let parsed = crate::scene::parse_override(&format!("{key}={v}"))
                .ok()
                .map(|(_, value)| value);
            let same = |(w, p): &&(&str, Option<toml::Value>)| match (p, &parsed) {
                (Some(p), Some(q)) => p == q,
                _ => *w == v.as_str(),
            };
            if let Some((w, _)) = seen.iter().find(same) {
                let also = if *w == v {
                    String::new()
                } else {
                    format!(" (as {w})")
                };
                return Err(err(format!("the value {v} is given twice{also}")));
            }
            seen.push((v.as_str(), parsed));
        }
        Ok(Self {
            key: key.to_string(),
            values,
        })
    }
}

/// Splits at top-level commas; every value must be non-empty.
fn split_values(raw: &str) -> Result<Vec<String>, String> {
    let mut values = Vec::new();
    let mut depth = 0i32;
    let mut quote: Option<char> = None;
    let mut current = String::new();
    for c in raw.chars() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                '[' | '{' => depth += 1,
                ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    values.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            },
        }
        current.push(c);
    }
    if quote.is_some() || depth != 0 {
        return Err("unbalanced quotes or brackets".into());
    }
    values.push(current);
    let values: Vec<String> = values.into_iter().map(|v| v.trim().to_string()).collect();
    if values.iter().any(String::is_empty) {
        return Err("empty value (values are separated by commas)".into());
    }
    Ok(values)
}

/// The runs of `msc sweep`: every combination of the `varies` values (the first `--vary`
/// changes slowest), each with `base_set` and then its own `key=value` overrides.
pub fn sweep(scene: &str, base_set: &[String], varies: &[Vary]) -> Result<Plan, BatchError> {
    if varies.is_empty() {
        return Err(BatchError::Vary {
            arg: String::new(),
            message: "give at least one --vary KEY=V1,V2,...".into(),
        });
    }
    let mut keys = HashSet::new();
    for v in varies {
        if !keys.insert(v.key.as_str()) {
            return Err(BatchError::Vary {
                arg: format!("{}=...", v.key),
                message: "this key is varied twice; list all its values in one --vary".into(),
            });
        }
    }
    // A --vary value that gives a key of a --set or an earlier --vary a new value (the same
    // key, or an array or value holding it) would run alike runs under different labels:
    // refused while planning, not when the first run loads. An inline table merges, so a
    // key it leaves out keeps its value.
    for (j, v) in varies.iter().enumerate() {
        // (the earlier --set or --vary value, its varied key)
        let earlier: Vec<(String, Option<&str>)> = (base_set.iter())
            .map(|s| (s.clone(), None))
            .chain(varies[..j].iter().flat_map(|u| {
                (u.values.iter()).map(|a| (format!("{}={a}", u.key), Some(u.key.as_str())))
            }))
            .collect();
        for b in &v.values {
            for (e, varied) in &earlier {
                let later = format!("{}={b}", v.key);
                let Some((key, by)) = crate::scene::override_overwrites(e, &later) else {
                    continue;
                };
                let (name, fix) = match varied {
                    None => (
                        "--set",
                        "drop that --set or give its value in --vary".into(),
                    ),
                    Some(_) if key == by => ("--vary", format!("vary {key} in one --vary only")),
                    Some(u) => ("--vary", format!("give --vary {u} after this one")),
                };
                return Err(BatchError::Vary {
                    arg: format!("{}=...", v.key),
                    message: format!("its value {b} replaces {name} {e} (at {by}): {fix}"),
                });
            }
        }
    }
    let mut combos: Vec<Vec<&str>> = vec![vec![]];
    for v in varies {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                v.values.iter().map(move |val| {
                    let mut next = c.clone();
                    next.push(val.as_str());
                    next
                })
            })
            .collect();
    }
    let mut runs = Vec::with_capacity(combos.len());
    for combo in combos {
        let assignments: Vec<String> = varies
            .iter()
            .zip(&combo)
            .map(|(v, val)| format!("{}={val}", v.key))
            .collect();
        let readable: Vec<String> = varies
            .iter()
            .zip(&combo)
            .map(|(v, val)| format!("{}={}", v.key, unquote(val)))
            .collect();
        let mut set = base_set.to_vec();
        set.extend(assignments);
        runs.push(RunSpec {
            name: safe_name(&readable.join("__")),
            scene: scene.to_string(),
            set,
            columns: combo.iter().map(|s| unquote(s).to_string()).collect(),
        });
    }
    uniquify(&mut runs);
    Ok(Plan {
        columns: varies.iter().map(|v| v.key.clone()).collect(),
        runs,
    })
}

/// A TOML string value without its quotes, for names and columns.
fn unquote(v: &str) -> &str {
    let t = v.trim();
    for q in ['"', '\''] {
        if t.len() >= 2 && t.starts_with(q) && t.ends_with(q) {
            return &t[1..t.len() - 1];
        }
    }
    t
}

/// Characters kept in folder names; everything else becomes `_`.
fn is_safe(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+' | '=')
}

/// Longest folder name kept whole; longer ones are cut and given a hash of the full name.
const MAX_NAME: usize = 120;

/// A folder name from readable text: unsafe characters become `_`, a leading dot is
/// prefixed (no hidden folders, no `.` or `..`), a Windows device name is suffixed, and an
/// overlong name is cut and ends in a hash of the whole text so that distinct long names
/// stay distinct.
pub fn safe_name(text: &str) -> String {
    let mut name: String = text
        .chars()
        .map(|c| if is_safe(c) { c } else { '_' })
        .collect();
    if name.is_empty() || name.starts_with('.') {
        name.insert(0, '_');
    }
    // `nul`, `aux.x=1`: a device on Windows; `nul_`, `aux_.x=1` are folders there.
    if super::windows_device(&name) {
        name.insert(name.find('.').unwrap_or(name.len()), '_');
    }
    if name.len() > MAX_NAME {
        // FNV-1a over the original text: stable across runs and platforms.
        let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        name.truncate(MAX_NAME - 17);
        name.push_str(&format!("-{hash:016x}"));
    }
    name
}

/// Distinct folders for runs whose texts became the same name, or names one folder on a
/// case-insensitive file system (`a=X`, `a=x`): `-2`, `-3`, ... in plan order, the name
/// cut to keep it within [`MAX_NAME`] (a longer one fails [`check_name`] when plan.json
/// is read back by the other shards and merge).
fn uniquify(runs: &mut [RunSpec]) {
    let mut used: HashSet<String> = HashSet::new();
    for run in runs.iter_mut() {
        if used.insert(super::folder_key(&run.name)) {
            continue;
        }
        let mut k = 2;
        let name = loop {
            let suffix = format!("-{k}");
            // Names are ASCII: any byte is a char boundary.
            let keep = run.name.len().min(MAX_NAME - suffix.len());
            let name = format!("{}{suffix}", &run.name[..keep]);
            if !used.contains(&super::folder_key(&name)) {
                break name;
            }
            k += 1;
        };
        used.insert(super::folder_key(&name));
        run.name = name;
    }
}

/// The manifest file of `msc batch`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    /// Overrides applied to every run, before the run's own.
    #[serde(default)]
    set: Vec<String>,
    #[serde(default)]
    runs: Vec<ManifestRun>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestRun {
    scene: String,
    name: Option<String>,
    #[serde(default)]
    set: Vec<String>,
}

/// The runs of `msc batch MANIFEST`: each `[[runs]]` entry's scene (a path relative to the
/// manifest, or a built-in name) with the manifest's `set`, the run's `set`, then
/// `extra_set` (the command line's `--set`, which wins).
pub fn manifest(path: &Path, extra_set: &[String]) -> Result<Plan, BatchError> {
    let text = crate::files::read_to_string(path).map_err(|source| BatchError::ReadManifest {
        path: path.to_path_buf(),
        source,
    })?;
    manifest_from_str(&text, path, extra_set)
}

fn manifest_from_str(text: &str, path: &Path, extra_set: &[String]) -> Result<Plan, BatchError> {
    let err = |message: String| BatchError::Manifest {
        path: path.to_path_buf(),
        message,
    };
    let file: ManifestFile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
    if file.runs.is_empty() {
        return Err(err(
            "no runs: add [[runs]] entries with scene = \"...\"".into()
        ));
    }
    let base = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut runs = Vec::with_capacity(file.runs.len());
    let mut names: Vec<(String, String, usize)> = Vec::new();
    for (i, run) in file.runs.into_iter().enumerate() {
        if run.scene.trim().is_empty() {
            return Err(err(format!("runs[{i}].scene: must not be empty")));
        }
        let name = match &run.name {
            Some(n) => n.clone(),
            None => {
                let stem = Path::new(&run.scene)
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| run.scene.clone());
                let mut parts = vec![stem];
                parts.extend(run.set.iter().map(|s| {
                    let (k, v) = s.split_once('=').unwrap_or((s, ""));
                    format!("{}={}", k.trim(), unquote(v))
                }));
                safe_name(&parts.join("__"))
            }
        };
        let key = if run.name.is_some() { ".name" } else { "" };
        check_name(&name).map_err(|m| err(format!("runs[{i}]{key}: {m}")))?;
        let key = super::folder_key(&name);
        if let Some((n, _, j)) = names.iter().find(|(_, k, _)| *k == key) {
            let seen = if *n == name {
                String::new()
            } else {
                format!(
                    " (as '{n}' where case and trailing dots do not count: macOS, \
                     Windows)"
                )
            };
            return Err(err(format!(
                "runs[{j}] and runs[{i}] would both write to the folder '{name}'{seen}; \
                 give them distinct names (name = \"...\")"
            )));
        }
        names.push((name.clone(), key, i));
        let mut set = file.set.clone();
        set.extend(run.set.iter().cloned());
        set.extend(extra_set.iter().cloned());
        runs.push(RunSpec {
            name,
            scene: resolve_scene(&base, &run.scene),
            set,
            columns: vec![run.scene.clone(), run.set.join("; ")],
        });
    }
    Ok(Plan {
        columns: vec!["scene".into(), "set".into()],
        runs,
    })
}

/// A manifest's scene: a file beside the manifest when there is one (or when it looks like
/// a path, so that the error names the file looked for), else a built-in name, pinned as
/// `builtin:NAME`: a file of that name in the current folder is not the manifest's scene.
fn resolve_scene(base: &Path, scene: &str) -> String {
    let p = Path::new(scene);
    if p.is_absolute() {
        return scene.to_string();
    }
    let joined = base.join(p);
    let looks_like_path = scene.ends_with(".toml") || scene.contains('/') || scene.contains('\\');
    if joined.is_file() || looks_like_path {
        joined.to_string_lossy().into_owned()
    } else if crate::scene::builtin_text(scene).is_some() {
        format!("{}{scene}", crate::scene::BUILTIN_PREFIX)
    } else if p.exists() {
        // Not beside the manifest: the error names where it was looked for.
        joined.to_string_lossy().into_owned()
    } else {
        scene.to_string()
    }
}

/// A run name (given, or derived from the scene and its overrides) must be a safe folder
/// name on every system (no Windows device name), and not one of the batch folder's own.
pub(super) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if let Some(c) = name.chars().find(|&c| !is_safe(c)) {
        return Err(format!(
            "'{name}' contains {c:?}; use letters, digits and . _ - + ="
        ));
    }
    if name.starts_with('.') {
        return Err(format!("'{name}' must not start with a dot"));
    }
    if name.len() > MAX_NAME {
        return Err(format!("'{name}' is longer than {MAX_NAME} characters"));
    }
    if super::windows_device(name) {
        return Err(format!(
            "'{name}' is a device name on Windows (CON, PRN, AUX, NUL, COM0-9, LPT0-9, \
             in any case and with any extension), where the batch folder could not hold it; \
             give the run another name (name = \"...\")"
        ));
    }
    // Not one of the batch folder's own files or folders (running there would clear or
    // replace them): `runs.csv`, a shard's `runs.shard-*.csv`, `plan.json`, the Slurm
    // script and its log folder.
    let key = super::folder_key(name);
    let own = |n: &str| super::folder_key(n) == key;
    if super::OWN_NAMES.iter().any(|n| own(n)) || key.starts_with("runs.shard-") {
        return Err(format!(
            "'{name}' is the name of one of the batch folder's own files; \
             give the run another name (name = \"...\")"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_at_top_level_commas_only() {
        let v = Vary::parse("mesh.resolution=[8, 8],[16,16]").unwrap();
        assert_eq!(v.key, "mesh.resolution");
        assert_eq!(v.values, ["[8, 8]", "[16,16]"]);
        let v = Vary::parse("integrator.method=\"a,b\", verlet").unwrap();
        assert_eq!(v.values, ["\"a,b\"", "verlet"]);
        for bad in ["novalue", "=1,2", "a.b=1,,2", "a.b=[1,2", "a.b=1,1", "a.b="] {
            assert!(Vary::parse(bad).is_err(), "{bad}");
        }
        // Values that the scene reads as one are one value given twice.
        for twice in [
            "a.b=0.01,0.010",
            "a.b=0.01,1e-2",
            "a.b=cg,\"cg\"",
            "a.b=[1, 2],[1,2]",
        ] {
            let e = Vary::parse(twice).unwrap_err().to_string();
            assert!(e.contains("given twice"), "{twice}: {e}");
        }
        assert!(Vary::parse("a.b=1,2,\"1\"").is_ok());
    }

    #[test]
    fn a_sweep_is_the_cartesian_product_with_readable_names() {
        let varies = [
            Vary::parse("integrator.dt=0.015,0.03").unwrap(),
            Vary::parse("integrator.solver.method=\"cg\",jacobi").unwrap(),
        ];
        let plan = sweep("torus", &["output.every=5".into()], &varies).unwrap();
        assert_eq!(plan.columns, ["integrator.dt", "integrator.solver.method"]);
        let names: Vec<&str> = plan.runs.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "integrator.dt=0.015__integrator.solver.method=cg",
                "integrator.dt=0.015__integrator.solver.method=jacobi",
                "integrator.dt=0.03__integrator.solver.method=cg",
                "integrator.dt=0.03__integrator.solver.method=jacobi",
            ]
        );
        assert_eq!(
            plan.runs[1].set,
            [
                "output.every=5",
                "integrator.dt=0.015",
                "integrator.solver.method=jacobi"
            ]
        );
        assert_eq!(plan.runs[2].columns, ["0.03", "cg"]);
        assert!(sweep("torus", &[], &[]).is_err());
        let twice = [varies[0].clone(), varies[0].clone()];
        assert!(sweep("torus", &[], &twice).is_err());
    }

    #[test]
    fn names_are_safe_and_distinct() {
        assert_eq!(safe_name("a=[1, 2]"), "a=_1__2_");
        assert_eq!(safe_name(".."), "_..");
        assert_eq!(safe_name("x/../y"), "x_.._y");
        let long_a = "k=".to_string() + &"a".repeat(300);
        let long_b = "k=".to_string() + &"a".repeat(299) + "b";
        let (a, b) = (safe_name(&long_a), safe_name(&long_b));
        assert!(a.len() <= MAX_NAME && b.len() <= MAX_NAME);
        assert_ne!(a, b);
        // Two values that sanitize alike still get two folders.
        let plan = sweep("t", &[], &[Vary::parse("a=\"x y\",\"x_y\"").unwrap()]).unwrap();
        assert_eq!(plan.runs[0].name, "a=x_y");
        assert_eq!(plan.runs[1].name, "a=x_y-2");
    }

    #[test]
    fn manifest_runs_resolve_names_scenes_and_overrides() {
        let dir = std::env::temp_dir().join(format!("msc-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.toml"), "").unwrap();
        let path = dir.join("batch.toml");
        let text = r#"
set = ["output.every=5"]
[[runs]]
scene = "a.toml"
set = ["integrator.dt=0.03"]
[[runs]]
scene = "torus"
name = "builtin"
"#;
        let plan = manifest_from_str(text, &path, &["integrator.steps=3".into()]).unwrap();
        assert_eq!(plan.columns, ["scene", "set"]);
        let a = &plan.runs[0];
        assert_eq!(a.name, "a__integrator.dt=0.03");
        assert_eq!(Path::new(&a.scene), dir.join("a.toml"));
        assert_eq!(
            a.set,
            ["output.every=5", "integrator.dt=0.03", "integrator.steps=3"]
        );
        assert_eq!(a.columns, ["a.toml", "integrator.dt=0.03"]);
        assert_eq!(plan.runs[1].scene, "builtin:torus");
        assert_eq!(plan.runs[1].name, "builtin");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_manifests_name_the_problem() {
        let path = Path::new("m.toml");
        let cases = [
            ("", "no runs"),
            ("[[runs]]\nname = \"x\"\n", "scene"),
            ("[[runs]]\nscene = \"t\"\nbogus = 1\n", "bogus"),
            ("[[runs]]\nscene = \"t\"\nname = \"a/b\"\n", "runs[0].name"),
            (
                "[[runs]]\nscene = \"t\"\n[[runs]]\nscene = \"t\"\n",
                "runs[0] and runs[1]",
            ),
            ("[[runs]\n", "m.toml"),
            (
                "[[runs]]\nscene = \"t\"\nname = \"slurm-logs\"\n",
                "slurm-logs",
            ),
            (
                "[[runs]]\nscene = \"t\"\nname = \"plan.json\"\n",
                "plan.json",
            ),
            ("[[runs]]\nscene = \"t\"\nname = \"runs.csv\"\n", "runs.csv"),
            (
                "[[runs]]\nscene = \"t\"\nname = \"slurm-array.sh\"\n",
                "own files",
            ),
            (
                "[[runs]]\nscene = \"t\"\nname = \"runs.shard-1-of-2.csv\"\n",
                "own",
            ),
            (
                "[[runs]]\nscene = \"slurm-logs.toml\"\n",
                "runs[0]: 'slurm-logs'",
            ),
        ];
        for (text, needle) in cases {
            let e = manifest_from_str(text, path, &[]).unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
