//! The mutation check, run before a release (not by CI, not by `cargo test`): plants each
//! bug of `tests/mutations/mutations.toml`, one at a time, in a scratch copy of the tree,
//! builds it, runs only the test targets listed for that bug, and reports whether a test
//! caught it. A bug that survives, a pattern found other than exactly once, a mutant that
//! does not build or an unmutated baseline that fails makes the exit status non-zero.
//!
//! ```sh
//! nice -n 10 cargo test --test mutations              # every mutation
//! nice -n 10 cargo test --test mutations -- NAME...   # some; `-- --list` lists them
//! cargo test --test mutations -- --check              # each pattern found once? (no build)
//! ```
//!
//! The copy (the working tree's tracked and untracked files, not the ignored ones) and its
//! build live in `$MSC_MUTATIONS_DIR` (default: `msc-mutations` in the temporary folder),
//! kept between runs so only what a mutation touches is rebuilt; the working tree itself is
//! never written. The tests run with `MSC_REQUIRE_GPU=1`: the GPU tests need an adapter
//! (lavapipe will do). `MSC_MUTATIONS_TIMEOUT` (seconds, default 1800) bounds each build
//! and each test run; a test run that exceeds it counts as caught (a hang is noticed).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Spec {
    mutation: Vec<Mutation>,
}

/// One planted bug: `find` (exactly once among the files matching `files`) becomes
/// `replace`; `tests` are the test targets (`cargo test --test NAME`, or `lib` for the
/// library's unit tests) that must catch it, `filter` an optional test-name filter for
/// them.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Mutation {
    name: String,
    bug: String,
    files: String,
    find: String,
    replace: String,
    tests: Vec<String>,
    filter: Option<String>,
}

/// How one mutation ended.
enum Outcome {
    /// A test failed (the failing tests, as `target::test`), or the run timed out.
    Caught(String),
    Survived,
    /// The mutation could not be tried: the reason.
    Error(String),
}

struct Scratch {
    root: PathBuf,
    tree: PathBuf,
    target: PathBuf,
    logs: PathBuf,
    timeout: Duration,
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("mutations: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<bool, String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let spec_path = root.join("tests/mutations/mutations.toml");
    let text =
        std::fs::read_to_string(&spec_path).map_err(|e| format!("{}: {e}", spec_path.display()))?;
    let spec: Spec = toml::from_str(&text).map_err(|e| format!("{}: {e}", spec_path.display()))?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for m in &spec.mutation {
            println!("{:<28} {} [{}]", m.name, m.bug, m.tests.join(", "));
        }
        return Ok(true);
    }
    let check_only = args.iter().any(|a| a == "--check");
    let args: Vec<String> = args.into_iter().filter(|a| a != "--check").collect();
    let chosen: Vec<&Mutation> = spec
        .mutation
        .iter()
        .filter(|m| args.is_empty() || args.contains(&m.name))
        .collect();
    if let Some(unknown) = args
        .iter()
        .find(|a| !spec.mutation.iter().any(|m| &m.name == *a))
    {
        return Err(format!("no mutation named {unknown:?} (see -- --list)"));
    }
    let dir = std::env::var_os("MSC_MUTATIONS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("msc-mutations"));
    let timeout = std::env::var("MSC_MUTATIONS_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1800);
    let s = Scratch {
        root,
        tree: dir.join("tree"),
        target: dir.join("target"),
        logs: dir.join("logs"),
        timeout: Duration::from_secs(timeout),
    };
    std::fs::create_dir_all(&s.logs).map_err(|e| format!("{}: {e}", s.logs.display()))?;
    println!("scratch copy and build: {}", dir.display());
    if check_only {
        // Each pattern found exactly once, nothing built.
        s.sync()?;
        let mut ok = true;
        for m in &chosen {
            match s.locate(m) {
                Ok((file, _)) => println!("{}: {}", m.name, file.display()),
                Err(e) => {
                    println!("{}: ERROR: {e}", m.name);
                    ok = false;
                }
            }
        }
        return Ok(ok);
    }

    // The unmutated tree must pass every target used, or "caught" would mean nothing.
    let all: BTreeSet<&str> = chosen
        .iter()
        .flat_map(|m| m.tests.iter().map(String::as_str))
        .collect();
    let all: Vec<&str> = all.into_iter().collect();
    s.sync()?;
    let started = Instant::now();
    match s.test("baseline", &all, None)? {
        Outcome::Survived => println!(
            "baseline: {} pass unmutated ({:.0} s)",
            all.join(", "),
            started.elapsed().as_secs_f64()
        ),
        Outcome::Caught(what) => {
            return Err(format!(
                "the unmutated tree fails {what}; see {}",
                s.log("baseline").display()
            ))
        }
        Outcome::Error(e) => return Err(format!("baseline: {e}")),
    }

    let mut rows = Vec::new();
    for m in &chosen {
        let started = Instant::now();
        s.sync()?;
        let outcome = match s.plant(m) {
            Ok(file) => {
                println!("{}: planted in {file}", m.name);
                let targets: Vec<&str> = m.tests.iter().map(String::as_str).collect();
                s.test(&m.name, &targets, m.filter.as_deref())?
            }
            Err(e) => Outcome::Error(e),
        };
        let secs = started.elapsed().as_secs_f64();
        let (result, detail) = match &outcome {
            Outcome::Caught(by) => ("caught", by.clone()),
            Outcome::Survived => ("SURVIVED", format!("{} pass", m.tests.join(", "))),
            Outcome::Error(e) => ("ERROR", e.clone()),
        };
        println!("{}: {result} ({secs:.0} s): {detail}", m.name);
        rows.push((m.name.as_str(), result, detail));
    }
    // Leave the copy unmutated.
    s.sync()?;

    println!("\n| mutation | result | caught by |\n|---|---|---|");
    for (name, result, detail) in &rows {
        println!("| {name} | {result} | {detail} |");
    }
    let bad = rows.iter().filter(|r| r.1 != "caught").count();
    println!(
        "\n{} of {} caught; logs in {}",
        rows.len() - bad,
        rows.len(),
        s.logs.display()
    );
    Ok(bad == 0)
}

impl Scratch {
    fn log(&self, name: &str) -> PathBuf {
        self.logs.join(format!("{name}.log"))
    }

    /// Makes the copy equal to the working tree's tracked and untracked files: a file that
    /// differs is rewritten (so its new time makes cargo rebuild it), one that does not is
    /// left alone, one the tree lacks is removed.
    fn sync(&self) -> Result<(), String> {
        let out = Command::new("git")
            .args(["ls-files", "-z", "-co", "--exclude-standard"])
            .current_dir(&self.root)
            .output()
            .map_err(|e| format!("git ls-files: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "git ls-files: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let listed: BTreeSet<PathBuf> = out
            .stdout
            .split(|&b| b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
            .filter(|p| self.root.join(p).is_file())
            .collect();
        let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
        for rel in &listed {
            let (src, dst) = (self.root.join(rel), self.tree.join(rel));
            let bytes = std::fs::read(&src).map_err(|e| io(&src, e))?;
            if std::fs::read(&dst).is_ok_and(|b| b == bytes) {
                continue;
            }
            std::fs::create_dir_all(dst.parent().unwrap()).map_err(|e| io(&dst, e))?;
            std::fs::write(&dst, &bytes).map_err(|e| io(&dst, e))?;
        }
        for rel in files_under(&self.tree, Path::new("")) {
            if !listed.contains(&rel) {
                let p = self.tree.join(&rel);
                std::fs::remove_file(&p).map_err(|e| io(&p, e))?;
            }
        }
        Ok(())
    }

    /// Replaces `find` by `replace` in the copy; the file it was in, or why not.
    fn plant(&self, m: &Mutation) -> Result<String, String> {
        let (rel, text) = self.locate(m)?;
        let p = self.tree.join(&rel);
        std::fs::write(&p, text.replacen(&m.find, &m.replace, 1))
            .map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(rel.display().to_string())
    }

    /// The one file of the copy that holds `find` (once), and its text; or why not.
    fn locate(&self, m: &Mutation) -> Result<(PathBuf, String), String> {
        let pattern: Vec<&str> = m.files.split('/').collect();
        let mut hits = Vec::new();
        for rel in files_under(&self.tree, Path::new("")) {
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            if !glob(&pattern, &parts) {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(self.tree.join(&rel)) {
                let n = text.matches(m.find.as_str()).count();
                if n > 0 {
                    hits.push((rel, text, n));
                }
            }
        }
        let total: usize = hits.iter().map(|h| h.2).sum();
        if total != 1 {
            let r#where: Vec<String> = hits.iter().map(|h| h.0.display().to_string()).collect();
            return Err(if total == 0 {
                format!("PATTERN NOT FOUND in {}", m.files)
            } else {
                format!(
                    "pattern found {total} times (in {}): make it unique",
                    r#where.join(", ")
                )
            });
        }
        let (rel, text, _) = hits.swap_remove(0);
        Ok((rel, text))
    }

    /// Builds the test targets, then runs them (log: `logs/<name>.log`).
    fn test(&self, name: &str, targets: &[&str], filter: Option<&str>) -> Result<Outcome, String> {
        let log_path = self.log(name);
        let mut log =
            std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
        let mut args = vec!["test".to_string()];
        for t in targets {
            // `lib`: the library's own unit tests (those that reach crate internals).
            if *t == "lib" {
                args.push("--lib".to_string());
            } else {
                args.extend(["--test".to_string(), t.to_string()]);
            }
        }
        let mut build = args.clone();
        build.push("--no-run".into());
        match self.cargo(&build, &mut log)? {
            Some(true) => {}
            Some(false) => {
                return Ok(Outcome::Error(format!(
                    "does not build; see {}",
                    log_path.display()
                )))
            }
            None => return Ok(Outcome::Error("the build timed out".into())),
        }
        // Every listed target runs, so the report names every test that caught it.
        args.push("--no-fail-fast".into());
        if let Some(f) = filter {
            args.extend(["--".to_string(), f.to_string()]);
        }
        Ok(match self.cargo(&args, &mut log)? {
            Some(true) => Outcome::Survived,
            Some(false) => Outcome::Caught(failed_tests(&log_path)),
            None => Outcome::Caught(format!("timed out after {} s", self.timeout.as_secs())),
        })
    }

    /// Runs cargo in the copy, its output appended to `log`: whether it succeeded, or
    /// `None` when it ran out of time (its process group is then killed).
    fn cargo(&self, args: &[String], log: &mut std::fs::File) -> Result<Option<bool>, String> {
        use std::os::unix::process::CommandExt;
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        writeln!(log, "$ cargo {}", args.join(" ")).ok();
        let out = log.try_clone().map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut child = Command::new(cargo)
            .args(args)
            .current_dir(&self.tree)
            .env("CARGO_TARGET_DIR", &self.target)
            .env("MSC_REQUIRE_GPU", "1")
            // No debug info: a smaller, faster scratch build.
            .env("CARGO_PROFILE_DEV_DEBUG", "false")
            .env("CARGO_PROFILE_TEST_DEBUG", "false")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cargo: {e}"))?;
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                return Ok(Some(status.success()));
            }
            if Instant::now() > deadline {
                let group = format!("-{}", child.id());
                for signal in ["-TERM", "-KILL"] {
                    let _ = Command::new("kill").args([signal, "--", &group]).status();
                    std::thread::sleep(Duration::from_secs(2));
                }
                let _ = child.wait();
                writeln!(log, "timed out").ok();
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// The failed tests a `cargo test` log names, as `target::test`.
fn failed_tests(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut target = String::new();
    let mut failed = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.trim().strip_prefix("Running tests/") {
            target = rest.split(".rs").next().unwrap_or("").to_string();
        } else if let Some(t) = line
            .strip_prefix("test ")
            .and_then(|l| l.strip_suffix(" ... FAILED"))
        {
            failed.push(format!("{target}::{t}"));
        }
    }
    if failed.is_empty() {
        "a test run that failed without naming a test (see its log)".into()
    } else {
        failed.join(", ")
    }
}

/// Every file under `dir`, relative to it (`rel` is the path so far).
fn files_under(dir: &Path, rel: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join(rel)) else {
        return out;
    };
    for e in entries.flatten() {
        let r = rel.join(e.file_name());
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(files_under(dir, &r)),
            Ok(t) if t.is_file() => out.push(r),
            _ => {}
        }
    }
    out
}

/// Whether a path (split at `/`) matches a pattern: `**` is any number of folders, `*`
/// any characters within one name.
fn glob(pattern: &[&str], path: &[&str]) -> bool {
    match (pattern.first(), path.first()) {
        (None, None) => true,
        (Some(&"**"), _) => {
            glob(&pattern[1..], path) || (!path.is_empty() && glob(pattern, &path[1..]))
        }
        (Some(p), Some(name)) => wildcard(p, name) && glob(&pattern[1..], &path[1..]),
        _ => false,
    }
}

fn wildcard(p: &str, s: &str) -> bool {
    match p.split_once('*') {
        None => p == s,
        Some((head, rest)) => {
            s.starts_with(head)
                && (0..=s.len() - head.len())
                    .filter(|&i| s.is_char_boundary(head.len() + i))
                    .any(|i| wildcard(rest, &s[head.len() + i..]))
        }
    }
}
