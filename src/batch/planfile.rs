//! `plan.json`: the plan of a sharded batch, written into the batch folder by every shard
//! before it runs, so that `msc merge` knows every planned run and how to rerun a shard.
//! Every shard writes the same plan; a shard whose plan differs from the one already
//! there (other `--vary` values, another shard count, `--steps` or backend) is refused.

use super::plan::{Plan, RunSpec};
use super::BatchError;
use crate::output::{write_atomic, OutputError};
use std::path::{Path, PathBuf};

/// The plan file's name in the batch folder.
pub const PLAN_FILE: &str = "plan.json";

/// How to rerun one shard: `cd CWD && PROGRAM ARGS... --shard K/N`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rerun {
    /// The folder the batch ran in (relative paths in `args` are relative to it).
    pub cwd: PathBuf,
    /// The `msc` executable.
    pub program: PathBuf,
    /// The command's arguments without `--shard`, `--slurm`, `--submit` and their values.
    pub args: Vec<String>,
}

impl Rerun {
    /// The shell command that reruns shard `shard` (`K/N`).
    pub fn command(&self, shard: &str) -> String {
        let mut words = vec![shell_quote(&self.program.to_string_lossy())];
        words.extend(self.shell_args());
        words.push("--shard".into());
        words.push(shard.to_string());
        format!(
            "cd {} && {}",
            shell_quote(&self.cwd.to_string_lossy()),
            words.join(" ")
        )
    }
}

/// The options of a rerun command that take a value.
const VALUE_OPTIONS: [&str; 6] = [
    "--set",
    "--vary",
    "--out",
    "--backend",
    "--steps",
    "--devices",
];

impl Rerun {
    /// The arguments as shell words that msc reads back as given. clap takes a word that
    /// starts with `-` for an option, so such a value is joined to its option (`--out -x`
    /// becomes `--out=-x`) and such a scene or manifest path is written `./-x.toml`.
    pub fn shell_args(&self) -> Vec<String> {
        let mut words = Vec::with_capacity(self.args.len());
        let mut args = self.args.iter().enumerate().peekable();
        while let Some((i, a)) = args.next() {
            let word = if VALUE_OPTIONS.contains(&a.as_str()) {
                match args.next_if(|(_, v)| v.starts_with('-')) {
                    Some((_, v)) => format!("{a}={v}"),
                    None => a.clone(),
                }
            } else if i == 1 && a.starts_with('-') {
                format!("./{a}")
            } else {
                a.clone()
            };
            words.push(shell_quote(&word));
        }
        words
    }

    /// This command for a batch folder now at `dir`: when its `--out` (relative to its
    /// `cwd`) is no longer that folder (the folder was moved or copied), `--out` names
    /// `dir` instead, as an absolute path. That path must be UTF-8: the command is text,
    /// and its bytes replaced (U+FFFD) would name another folder.
    pub fn for_folder(&self, dir: &Path) -> Result<Rerun, BatchError> {
        let mut r = self.clone();
        let Some(k) = r.args.iter().position(|a| a == "--out") else {
            return Ok(r);
        };
        let Some(out) = r.args.get(k + 1) else {
            return Ok(r);
        };
        let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        if !same(&self.cwd.join(out), dir) {
            let here = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
            let Some(text) = here.to_str() else {
                return Err(BatchError::FolderNotUtf8 { path: here });
            };
            r.args[k + 1] = text.to_owned();
        }
        Ok(r)
    }
}

/// A word as the shell reads it back unchanged: bare when it is plain, else single-quoted.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `path` as text for a file that names it for later (`place`: the Slurm job script, a
/// shard's plan.json): a path that is not UTF-8 would be stored with its bytes replaced
/// (U+FFFD) and name another file. The error is the message, for the caller's own error.
pub(crate) fn path_text<'a>(path: &'a Path, place: &str) -> Result<&'a str, String> {
    path.to_str().ok_or_else(|| not_utf8(path, place))
}

/// Why `place` cannot name `path`, which is not UTF-8, and what to do.
pub(super) fn not_utf8(path: &Path, place: &str) -> String {
    format!(
        "{} is not UTF-8 text; {place} cannot name it (rename it, or give it through a link \
         whose path is UTF-8)",
        path.display()
    )
}

/// One planned run, with its scene as the merge will load it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlannedRun {
    pub name: String,
    /// A built-in name, or a scene file's absolute path (so that `msc merge` loads it
    /// from any folder).
    pub scene: String,
    pub set: Vec<String>,
    pub columns: Vec<String>,
}

impl PlannedRun {
    /// `NAME (scene SCENE, --set A --set B)`, for messages.
    fn describe(&self) -> String {
        let set: Vec<String> = self.set.iter().map(|s| format!("--set {s}")).collect();
        if set.is_empty() {
            format!("{} (scene {})", self.name, self.scene)
        } else {
            format!("{} (scene {}, {})", self.name, self.scene, set.join(" "))
        }
    }
}

/// The contents of `plan.json`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlanFile {
    /// `sweep` or `batch`.
    pub command: String,
    /// N of `--shard K/N`.
    pub shards: usize,
    /// `auto`, `gpu` or `cpu`.
    pub backend: String,
    /// `--steps`, when given.
    pub steps: Option<u64>,
    pub columns: Vec<String>,
    pub runs: Vec<PlannedRun>,
    /// Not compared between shards: they may run from other folders or binaries.
    pub rerun: Rerun,
}

impl PlanFile {
    pub fn new(
        command: &str,
        plan: &Plan,
        shards: usize,
        backend: &str,
        steps: Option<u64>,
        rerun: Rerun,
    ) -> Self {
        // Merge loads the scenes from its own folder: a file by its absolute path, a
        // built-in as `builtin:NAME` (a file of that name there is not the plan's scene).
        let absolute = |scene: &str| {
            let p = Path::new(scene);
            if p.is_file() {
                std::path::absolute(p)
                    .map(|a| a.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| scene.to_string())
            } else {
                crate::scene::pin_builtin(scene)
            }
        };
        Self {
            command: command.to_string(),
            shards,
            backend: backend.to_string(),
            steps,
            columns: plan.columns.clone(),
            runs: plan
                .runs
                .iter()
                .map(|r| PlannedRun {
                    name: r.name.clone(),
                    scene: absolute(&r.scene),
                    set: r.set.clone(),
                    columns: r.columns.clone(),
                })
                .collect(),
            rerun,
        }
    }

    /// The plan, with scenes as stored.
    pub fn plan(&self) -> Plan {
        Plan {
            columns: self.columns.clone(),
            runs: self
                .runs
                .iter()
                .map(|r| RunSpec {
                    name: r.name.clone(),
                    scene: r.scene.clone(),
                    set: r.set.clone(),
                    columns: r.columns.clone(),
                })
                .collect(),
        }
    }

    /// Everything but [`Rerun`]: what every shard must agree on.
    fn same_plan(&self, other: &Self) -> bool {
        let strip = |p: &Self| {
            let mut p = p.clone();
            p.rerun.args.clear();
            p.rerun.cwd = PathBuf::new();
            p.rerun.program = PathBuf::new();
            p
        };
        strip(self) == strip(other)
    }

    /// Reads `DIR/plan.json`.
    pub fn read(dir: &Path) -> Result<Self, BatchError> {
        let path = dir.join(PLAN_FILE);
        let text = crate::files::read_to_string(&path).map_err(|source| BatchError::ReadPlan {
            path: path.clone(),
            message: if source.kind() == std::io::ErrorKind::NotFound {
                "not found: is this the --out folder of a sharded sweep or batch \
                 (--shard K/N, or a Slurm array task)?"
                    .into()
            } else {
                source.to_string()
            },
        })?;
        let mut plan: Self = serde_json::from_str(&text).map_err(|e| BatchError::ReadPlan {
            path: path.clone(),
            message: e.to_string(),
        })?;
        plan.check()
            .map_err(|message| BatchError::ReadPlan { path, message })?;
        // A plan written before built-ins were pinned holds a built-in's bare name, which
        // was then always the built-in (a file was written by its absolute path): the same
        // scene as `builtin:NAME`, so its later shards and merge still agree with it.
        for r in &mut plan.runs {
            let bare = !r.scene.starts_with(crate::scene::BUILTIN_PREFIX)
                && !Path::new(&r.scene).is_absolute();
            if bare && crate::scene::builtin_text(&r.scene).is_some() {
                r.scene = format!("{}{}", crate::scene::BUILTIN_PREFIX, r.scene);
            }
        }
        Ok(plan)
    }

    /// What every shard and `msc merge` rely on: at least one run, run names that are
    /// distinct folder names inside the batch folder (a tampered `../x` would read outside
    /// it, a duplicate would drop a run), one value per column for each run, and a shard
    /// count from 1 to the number of runs.
    fn check(&self) -> Result<(), String> {
        if self.runs.is_empty() {
            return Err("it lists no run".into());
        }
        // By folder: `A` and `a` share one on a case-insensitive file system.
        let mut seen = std::collections::HashMap::new();
        for r in &self.runs {
            super::plan::check_name(&r.name).map_err(|e| format!("run name {e}"))?;
            if let Some(first) = seen.insert(super::folder_key(&r.name), r.name.as_str()) {
                return Err(if first == r.name {
                    format!("the run name '{}' appears twice", r.name)
                } else {
                    format!(
                        "the run names '{first}' and '{}' name one folder where case and \
                         trailing dots do not count (macOS, Windows)",
                        r.name
                    )
                });
            }
            // Each run's values fill the table's columns: one more or less shifts its row.
            if r.columns.len() != self.columns.len() {
                return Err(format!(
                    "run '{}' has {} column values for the {} columns ({})",
                    r.name,
                    r.columns.len(),
                    self.columns.len(),
                    self.columns.join(", ")
                ));
            }
        }
        if self.shards == 0 || self.shards > self.runs.len() {
            return Err(format!(
                "the shard count {} is not from 1 to its {} runs",
                self.shards,
                self.runs.len()
            ));
        }
        Ok(())
    }

    /// Writes `DIR/plan.json` (atomically) unless it is there already with the same plan;
    /// [`BatchError::PlanMismatch`] when it is there with another one.
    pub fn write_or_check(&self, dir: &Path) -> Result<(), BatchError> {
        let path = dir.join(PLAN_FILE);
        if path.exists() {
            let existing = Self::read(dir)?;
            if !existing.same_plan(self) {
                return Err(BatchError::PlanMismatch {
                    path,
                    message: self.difference(&existing),
                });
            }
            return Ok(());
        }
        let json = serde_json::to_string_pretty(self).map_err(|source| OutputError::Json {
            path: path.clone(),
            source,
        })?;
        write_atomic(&path, json.as_bytes())?;
        Ok(())
    }

    /// For a batch run without `--shard` into `dir`: [`BatchError::PlanMismatch`] when
    /// `dir` holds the `plan.json` of sharded runs of another plan (other runs, or another
    /// `--steps`). Its `runs.csv` would otherwise be replaced by `msc merge` with the
    /// table of that other plan.
    pub fn check_unsharded(dir: &Path, plan: &Plan, steps: Option<u64>) -> Result<(), BatchError> {
        let path = dir.join(PLAN_FILE);
        if !path.exists() {
            return Ok(());
        }
        let existing = Self::read(dir)?;
        let (command, backend) = (&existing.command, &existing.backend);
        let mine = Self::new(
            command,
            plan,
            existing.shards,
            backend,
            steps,
            existing.rerun.clone(),
        );
        if existing.same_plan(&mine) {
            return Ok(());
        }
        Err(BatchError::PlanMismatch {
            path,
            message: mine.difference(&existing).replacen(
                "this shard's",
                "this unsharded batch's",
                1,
            ),
        })
    }

    /// The first difference from `other`, in words.
    fn difference(&self, other: &Self) -> String {
        let this = |what: &str, a: String, b: String| {
            format!("this shard's {what} is {a}, the folder's plan has {b}")
        };
        if self.command != other.command {
            this("command", self.command.clone(), other.command.clone())
        } else if self.shards != other.shards {
            this(
                "shard count",
                self.shards.to_string(),
                other.shards.to_string(),
            )
        } else if self.backend != other.backend {
            this("backend", self.backend.clone(), other.backend.clone())
        } else if self.steps != other.steps {
            let steps = |s: Option<u64>| s.map_or("no --steps".to_string(), |n| n.to_string());
            this("--steps", steps(self.steps), steps(other.steps))
        } else if self.runs.len() != other.runs.len() {
            this(
                "number of runs",
                self.runs.len().to_string(),
                other.runs.len().to_string(),
            )
        } else {
            match self
                .runs
                .iter()
                .zip(&other.runs)
                .enumerate()
                .find(|(_, (a, b))| a != b)
            {
                Some((i, (a, b))) => this(&format!("run {}", i + 1), a.describe(), b.describe()),
                None => "the plan's columns differ".into(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_file(shards: usize, values: &[&str]) -> PlanFile {
        let plan = Plan {
            columns: vec!["integrator.dt".into()],
            runs: values
                .iter()
                .map(|v| RunSpec {
                    name: format!("integrator.dt={v}"),
                    scene: "torus".into(),
                    set: vec![format!("integrator.dt={v}")],
                    columns: vec![v.to_string()],
                })
                .collect(),
        };
        let rerun = Rerun {
            cwd: "/somewhere".into(),
            program: "/bin/msc".into(),
            args: vec!["sweep".into(), "torus".into()],
        };
        PlanFile::new("sweep", &plan, shards, "cpu", Some(3), rerun)
    }

    #[test]
    fn every_shard_must_bring_the_same_plan() {
        let dir = tempfile::tempdir().unwrap();
        let a = plan_file(2, &["0.01", "0.02"]);
        a.write_or_check(dir.path()).unwrap();
        assert_eq!(PlanFile::read(dir.path()).unwrap(), a);
        // Another folder or binary is the same plan.
        let mut moved = a.clone();
        moved.rerun.cwd = "/elsewhere".into();
        moved.write_or_check(dir.path()).unwrap();
        // Another shard count or another value is not.
        match plan_file(3, &["0.01", "0.02"]).write_or_check(dir.path()) {
            Err(BatchError::PlanMismatch { message, .. }) => {
                assert!(message.contains("shard count is 3"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let other = plan_file(2, &["0.01", "0.03"]).write_or_check(dir.path());
        assert!(
            matches!(other, Err(BatchError::PlanMismatch { .. })),
            "{other:?}"
        );
        // The file is the first shard's still.
        assert_eq!(PlanFile::read(dir.path()).unwrap(), a);
    }

    #[test]
    fn a_plan_from_before_built_ins_were_pinned_is_the_same_plan() {
        let dir = tempfile::tempdir().unwrap();
        let a = plan_file(2, &["0.01", "0.02"]);
        assert_eq!(a.runs[0].scene, "builtin:torus");
        // As an earlier binary wrote it: the built-in's bare name.
        let mut old = a.clone();
        for r in &mut old.runs {
            r.scene = "torus".into();
        }
        let json = serde_json::to_string_pretty(&old).unwrap();
        std::fs::write(dir.path().join(PLAN_FILE), json).unwrap();
        assert_eq!(PlanFile::read(dir.path()).unwrap(), a);
        a.write_or_check(dir.path()).unwrap();
        // A bare name that is no built-in stays as written, and another plan.
        for r in &mut old.runs {
            r.scene = "no-such-scene".into();
        }
        std::fs::write(
            dir.path().join(PLAN_FILE),
            serde_json::to_string_pretty(&old).unwrap(),
        )
        .unwrap();
        assert_eq!(
            PlanFile::read(dir.path()).unwrap().runs[0].scene,
            "no-such-scene"
        );
        assert!(matches!(
            a.write_or_check(dir.path()),
            Err(BatchError::PlanMismatch { .. })
        ));
    }

    #[test]
    fn rerun_commands_survive_the_shell() {
        let r = Rerun {
            cwd: "/a b".into(),
            program: "/bin/msc".into(),
            args: vec![
                "sweep".into(),
                "--set".into(),
                "output.frames=\"none\"".into(),
                "it's".into(),
            ],
        };
        assert_eq!(
            r.command("2/4"),
            r#"cd '/a b' && /bin/msc sweep --set 'output.frames="none"' 'it'\''s' --shard 2/4"#
        );
        // Words clap would read as options stay values.
        let r = Rerun {
            cwd: "/a".into(),
            program: "/bin/msc".into(),
            args: [
                "sweep", "-s.toml", "--out", "-o", "--set", "a=-1", "--quiet",
            ]
            .map(String::from)
            .to_vec(),
        };
        assert_eq!(
            r.command("0/2"),
            "cd /a && /bin/msc sweep ./-s.toml --out=-o --set a=-1 --quiet --shard 0/2"
        );
    }

    /// A moved batch folder is named by the rerun commands as its new absolute path; one
    /// whose path is not UTF-8 is an error naming it, not a lossy path (U+FFFD in place
    /// of its bytes) that names another folder.
    #[cfg(unix)]
    #[test]
    fn a_moved_folder_is_named_as_it_is_or_refused() {
        use std::os::unix::ffi::OsStrExt;
        let tmp = tempfile::tempdir().unwrap();
        let r = Rerun {
            cwd: tmp.path().into(),
            program: "/bin/msc".into(),
            args: vec!["sweep".into(), "s.toml".into(), "--out".into(), "o".into()],
        };
        let moved = tmp.path().join("moved");
        std::fs::create_dir(&moved).unwrap();
        let out = r.for_folder(&moved).unwrap().args[3].clone();
        assert_eq!(Path::new(&out), moved);
        let odd = tmp.path().join(std::ffi::OsStr::from_bytes(b"m\xff"));
        std::fs::create_dir(&odd).unwrap();
        let e = r.for_folder(&odd).unwrap_err();
        assert!(
            matches!(&e, BatchError::FolderNotUtf8 { path } if path == &odd),
            "{e:?}"
        );
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        assert_eq!(e.exit_code(), 2);
    }
}
