//! `--slurm` and `--submit`: a Slurm array job script that runs a sweep or batch as N
//! shards, one array task each (the task reads its shard from `SLURM_ARRAY_TASK_ID`), and
//! its submission with `sbatch`.
//!
//! Every value that reaches the script is checked first: a control character (a newline
//! above all) is refused with the option that brought it, since it would end an `#SBATCH`
//! line or a command. `#SBATCH` lines do not go through a shell but through sbatch's own
//! word splitter (quotes group, `\` escapes, an unquoted `#` starts a comment), so their
//! values are double-quoted with `\` and `"` escaped; the log paths also double every `%`,
//! Slurm's filename pattern character. The command the tasks run is shell-quoted word by
//! word.

use super::planfile::{path_text, shell_quote, Rerun};
use crate::output::{write_atomic, OutputError};
use std::path::{Path, PathBuf};

/// The script's name in the batch folder.
pub const SCRIPT_FILE: &str = "slurm-array.sh";
/// The folder of the tasks' logs, in the batch folder.
pub const LOG_DIR: &str = "slurm-logs";

/// What `--slurm` and `--submit` can fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SlurmError {
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("--submit: cannot run sbatch ({source}); is this a Slurm login node? The script is {}; submit it with `sbatch` where Slurm is installed", script.display())]
    NoSbatch {
        script: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("sbatch refused {} ({status}): {stderr}", script.display())]
    Refused {
        script: PathBuf,
        status: String,
        stderr: String,
    },
    /// sbatch exited 0 but printed no job id.
    #[error(
        "sbatch accepted {} but printed no job id; look for the job with `squeue --me`",
        script.display()
    )]
    NoJobId { script: PathBuf },
    /// `option` is an option's name (`out`: shown `--out`), or a positional argument in
    /// words (`the scene`, `the manifest`: shown as is).
    #[error("{}: {message}", shown_option(option))]
    Option {
        option: &'static str,
        message: String,
    },
}

/// `--NAME` for an option, the words for a positional argument.
fn shown_option(option: &str) -> String {
    if option.starts_with("the ") {
        option.to_string()
    } else {
        format!("--{option}")
    }
}

impl SlurmError {
    /// 2 for a bad option, 1 when the script cannot be written or submitted.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Option { .. } => 2,
            _ => 1,
        }
    }
}

/// An array job of `shards` tasks.
#[derive(Clone, Debug)]
pub struct SlurmJob {
    pub shards: usize,
    /// `--gres` of every task (`gpu:1` by default); `None` leaves it out (a CPU cluster,
    /// or one without a gres.conf).
    pub gres: Option<String>,
    /// `--time` (e.g. `02:00:00`).
    pub time: Option<String>,
    pub partition: Option<String>,
    pub job_name: String,
    /// The command each task runs (its shard comes from the environment).
    pub command: Rerun,
}

impl SlurmJob {
    /// The script's text. Each task runs the same command; `MSC_SHARD_COUNT` pins N, so a
    /// task resubmitted on its own (`sbatch --array=K script`) is still shard K of N.
    /// Checks every value first ([`SlurmError::Option`] names the one refused), so a
    /// caller can call this before it creates anything.
    pub fn script(&self, out: &Path) -> Result<String, SlurmError> {
        if let Some(g) = &self.gres {
            check_gres(g)?;
        }
        if let Some(t) = &self.time {
            check_time(t)?;
        }
        if let Some(p) = &self.partition {
            check_partition(p)?;
        }
        check_printable("job-name", &self.job_name)?;
        if self.job_name.trim().is_empty() {
            // `--job-name=""` would leave Slurm's default (the script's file name).
            return Err(refuse("job-name", "is empty: give a name".into()));
        }
        if self.shards == 0 {
            return Err(SlurmError::Option {
                option: "shards",
                message: "must be at least 1".into(),
            });
        }
        self.check_command()?;
        let out = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
        let logs = log_pattern(&out.join(LOG_DIR))?;
        let mut s = String::from("#!/bin/bash\n");
        s.push_str("# Written by msc: one array task per shard of the batch below.\n");
        let mut sbatch = |option: &str, value: &str| {
            s.push_str(&format!("#SBATCH --{option}={}\n", sbatch_quote(value)));
        };
        sbatch("job-name", &self.job_name);
        sbatch("array", &format!("0-{}", self.shards - 1));
        sbatch("ntasks", "1");
        if let Some(g) = &self.gres {
            sbatch("gres", g);
        }
        if let Some(t) = &self.time {
            sbatch("time", t);
        }
        if let Some(p) = &self.partition {
            sbatch("partition", p);
        }
        // %A: the array's job id, %a: the task id.
        sbatch("output", &format!("{logs}/%A_%a.out"));
        sbatch("error", &format!("{logs}/%A_%a.err"));
        s.push_str("set -eu\n");
        s.push_str(&format!("export MSC_SHARD_COUNT={}\n", self.shards));
        s.push_str(&format!(
            "cd {}\n",
            shell_quote(&self.command.cwd.to_string_lossy())
        ));
        let mut words = vec![shell_quote(&self.command.program.to_string_lossy())];
        words.extend(self.command.shell_args());
        s.push_str(&format!("exec {}\n", words.join(" ")));
        Ok(s)
    }

    /// The command's folder, program and arguments: printable, and paths in UTF-8 (the
    /// script holds them as text). An argument is blamed on the option before it.
    fn check_command(&self) -> Result<(), SlurmError> {
        let c = &self.command;
        for (what, path) in [
            ("the working folder", &c.cwd),
            ("the msc executable", &c.program),
        ] {
            let text = path_text(path, "the job script").map_err(|message| SlurmError::Option {
                option: "slurm",
                message: format!("{what} {message}"),
            })?;
            check_printable("slurm", text).map_err(|_| SlurmError::Option {
                option: "slurm",
                message: format!("{what} {text:?} holds a control character"),
            })?;
        }
        let mut previous: Option<&str> = None;
        for a in &c.args {
            check_printable(option_of(previous), a)?;
            previous = Some(a);
        }
        Ok(())
    }

    /// Writes the script (and creates the log folder, which Slurm does not) into `out`.
    /// Nothing is created when a value is refused.
    pub fn write(&self, out: &Path) -> Result<PathBuf, SlurmError> {
        let text = self.script(out)?;
        let logs = out.join(LOG_DIR);
        std::fs::create_dir_all(&logs).map_err(|source| OutputError::CreateDir {
            path: logs.clone(),
            source,
        })?;
        let path = out.join(SCRIPT_FILE);
        write_atomic(&path, text.as_bytes())?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755));
        }
        Ok(path)
    }
}

/// The default job name: `msc-` and the out folder's name, with anything but letters,
/// digits, `-`, `_` and `.` replaced by `_` (so that a folder such as `a b` still names
/// a job, and the name is the user's only when given).
pub fn default_job_name(out: &Path) -> String {
    match out.file_name() {
        Some(n) => {
            let safe: String = n
                .to_string_lossy()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            format!("msc-{safe}")
        }
        None => "msc".into(),
    }
}

/// Runs `sbatch --parsable SCRIPT` and returns the job id it prints.
pub fn submit(script: &Path) -> Result<String, SlurmError> {
    let out = std::process::Command::new("sbatch")
        .arg("--parsable")
        .arg(script)
        .output()
        .map_err(|source| SlurmError::NoSbatch {
            script: script.to_path_buf(),
            source,
        })?;
    if !out.status.success() {
        return Err(SlurmError::Refused {
            script: script.to_path_buf(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    // `--parsable` prints `jobid` or `jobid;cluster`.
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text.trim().split(';').next().unwrap_or("").trim();
    if id.is_empty() {
        return Err(SlurmError::NoJobId {
            script: script.to_path_buf(),
        });
    }
    Ok(id.to_string())
}

/// The option an argument of the rerun command belongs to: the flag before it, or the
/// positional scene or manifest.
fn option_of(previous: Option<&str>) -> &'static str {
    match previous {
        Some("--out") => "out",
        Some("--set") => "set",
        Some("--vary") => "vary",
        Some("--steps") => "steps",
        Some("--backend") => "backend",
        Some("--devices") => "devices",
        Some("sweep") => "the scene",
        Some("batch") => "the manifest",
        _ => "slurm",
    }
}

/// The value as a message shows it: control characters escaped, so a newline is seen.
fn shown(v: &str) -> String {
    v.escape_debug().to_string()
}

fn refuse(option: &'static str, message: String) -> SlurmError {
    SlurmError::Option { option, message }
}

/// No control character (a newline would end an `#SBATCH` line or a command).
fn check_printable(option: &'static str, v: &str) -> Result<(), SlurmError> {
    if v.chars().any(char::is_control) {
        return Err(refuse(
            option,
            format!(
                "'{}' holds a control character (a newline, tab, escape, ...); it would \
                 break the job script",
                shown(v)
            ),
        ));
    }
    Ok(())
}

/// A plain word: non-empty, of letters, digits and `chars`.
fn plain(v: &str, chars: &str) -> bool {
    !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || chars.contains(c))
}

/// `--partition`: partition names (letters, digits, `-`, `_`, `.`), comma-separated.
fn check_partition(v: &str) -> Result<(), SlurmError> {
    check_printable("partition", v)?;
    if !v.split(',').all(|p| plain(p, "-_.")) {
        return Err(refuse(
            "partition",
            format!(
                "'{}' is not a partition name or a comma-separated list of them (letters, \
                 digits, '-', '_', '.')",
                shown(v)
            ),
        ));
    }
    Ok(())
}

/// `--gres`: `name[:type][:count]` items, comma-separated (e.g. `gpu:1`, `gpu:a100:2`).
fn check_gres(v: &str) -> Result<(), SlurmError> {
    check_printable("gres", v)?;
    let item = |g: &str| g.split(':').all(|f| plain(f, "-_.()"));
    if !v.split(',').all(item) {
        return Err(refuse(
            "gres",
            format!(
                "'{}' is not a generic resource list (name[:type][:count], comma-separated, \
                 e.g. gpu:1; `none` leaves the line out)",
                shown(v)
            ),
        ));
    }
    Ok(())
}

/// `--time`: one of Slurm's formats, `M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`, or
/// `UNLIMITED` / `INFINITE`.
fn check_time(v: &str) -> Result<(), SlurmError> {
    check_printable("time", v)?;
    let digits = |f: &str| !f.is_empty() && f.chars().all(|c| c.is_ascii_digit());
    let ok = if v.eq_ignore_ascii_case("unlimited") || v.eq_ignore_ascii_case("infinite") {
        true
    } else {
        let (days, clock) = match v.split_once('-') {
            Some((d, rest)) => (Some(d), rest),
            None => (None, v),
        };
        let fields: Vec<&str> = clock.split(':').collect();
        days.is_none_or(digits) && fields.len() <= 3 && fields.iter().all(|f| digits(f))
    };
    if !ok {
        return Err(refuse(
            "time",
            format!(
                "'{}' is not a Slurm time limit (minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S, \
                 e.g. 02:00:00)",
                shown(v)
            ),
        ));
    }
    Ok(())
}

/// A log path for `#SBATCH --output`: UTF-8, without `\` (which turns Slurm's filename
/// patterns off, so every task would write one file named `%A_%a.out`), each `%` doubled
/// (Slurm reads `%%` as one `%`).
fn log_pattern(logs: &Path) -> Result<String, SlurmError> {
    let text = path_text(logs, "the job script").map_err(|message| refuse("out", message))?;
    check_printable("out", text)?;
    if text.contains('\\') {
        return Err(refuse(
            "out",
            format!(
                "'{text}' holds a backslash, which turns off Slurm's log file patterns; \
                 choose a folder without one"
            ),
        ));
    }
    Ok(text.replace('%', "%%"))
}

/// A value as sbatch's `#SBATCH` word splitter reads it back unchanged: bare when plain,
/// else in double quotes with `\` and `"` escaped by `\`.
fn sbatch_quote(v: &str) -> String {
    if plain(v, "-_./:,=+@%") {
        v.to_string()
    } else {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(gres: Option<&str>) -> SlurmJob {
        SlurmJob {
            shards: 4,
            gres: gres.map(str::to_string),
            time: Some("01:30:00".into()),
            partition: None,
            job_name: "msc-sweep".into(),
            command: Rerun {
                cwd: "/home/u/study".into(),
                program: "/opt/msc/bin/msc".into(),
                args: vec![
                    "sweep".into(),
                    "torus".into(),
                    "--vary".into(),
                    "integrator.dt=0.01,0.02".into(),
                    "--out".into(),
                    "out dir".into(),
                ],
            },
        }
    }

    #[test]
    fn the_script_is_an_array_of_the_same_command() {
        let s = job(Some("gpu:1"))
            .script(Path::new("/scratch/out"))
            .unwrap();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "#!/bin/bash");
        for want in [
            "#SBATCH --array=0-3",
            "#SBATCH --gres=gpu:1",
            "#SBATCH --time=01:30:00",
            "#SBATCH --output=/scratch/out/slurm-logs/%A_%a.out",
            "export MSC_SHARD_COUNT=4",
            "cd /home/u/study",
            "exec /opt/msc/bin/msc sweep torus --vary integrator.dt=0.01,0.02 --out 'out dir'",
        ] {
            assert!(lines.contains(&want), "{want} missing from\n{s}");
        }
        assert!(!s.contains("--partition"), "{s}");
        // Every #SBATCH line comes before the first command.
        let last_sbatch = lines
            .iter()
            .rposition(|l| l.starts_with("#SBATCH"))
            .unwrap();
        let first_command = lines.iter().position(|l| !l.starts_with('#')).unwrap();
        assert!(last_sbatch < first_command, "{s}");
        let no_gres = job(None).script(Path::new("/scratch/out")).unwrap();
        assert!(!no_gres.contains("--gres"), "{no_gres}");
    }

    #[test]
    fn bad_sbatch_values_are_option_errors() {
        let mut j = job(Some("gpu:1"));
        j.partition = Some("a b".into());
        assert!(matches!(
            j.script(Path::new("o")),
            Err(SlurmError::Option {
                option: "partition",
                ..
            })
        ));
        for name in ["", "  "] {
            let mut j = job(Some("gpu:1"));
            j.job_name = name.into();
            assert!(matches!(
                j.script(Path::new("o")),
                Err(SlurmError::Option {
                    option: "job-name",
                    ..
                })
            ));
        }
        let mut j = job(Some("gpu:1"));
        j.shards = 0;
        assert!(matches!(
            j.script(Path::new("o")),
            Err(SlurmError::Option {
                option: "shards",
                ..
            })
        ));
    }

    /// The script names the working folder, the executable and the log folder as text:
    /// a path that is not UTF-8 is refused with the option that brought it, naming the
    /// path and the script, not written with its bytes replaced.
    #[cfg(unix)]
    #[test]
    fn a_path_that_is_not_utf8_is_refused_for_the_script() {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let odd = PathBuf::from(OsStr::from_bytes(b"/scratch/o\xff"));
        let mut cwd = job(None);
        cwd.command.cwd = odd.clone();
        let mut program = job(None);
        program.command.program = odd.clone();
        for (j, out, option, what) in [
            (
                cwd,
                Path::new("/scratch/out"),
                "slurm",
                "the working folder",
            ),
            (
                program,
                Path::new("/scratch/out"),
                "slurm",
                "the msc executable",
            ),
            (job(None), odd.as_path(), "out", ""),
        ] {
            let e = j.script(out).unwrap_err();
            let SlurmError::Option { option: o, message } = &e else {
                panic!("{what}: {e}");
            };
            assert_eq!(*o, option, "{e}");
            for want in [what, "/scratch/o", "is not UTF-8 text", "the job script"] {
                assert!(message.contains(want), "{want} missing from {e}");
            }
        }
    }
}
