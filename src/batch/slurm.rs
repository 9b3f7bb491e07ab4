//! `--slurm` and `--submit`: a Slurm array job script that runs a sweep or batch as N
//! shards, one array task each (the task reads its shard from `SLURM_ARRAY_TASK_ID`), and
//! its submission with `sbatch`.

use super::planfile::{shell_quote, Rerun};
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
    #[error("--{option}: {message}")]
    Option {
        option: &'static str,
        message: String,
    },
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
    pub fn script(&self, out: &Path) -> Result<String, SlurmError> {
        for (option, value) in [
            ("gres", &self.gres),
            ("time", &self.time),
            ("partition", &self.partition),
        ] {
            if let Some(v) = value {
                check_word(option, v)?;
            }
        }
        check_word("job-name", &self.job_name)?;
        if self.shards == 0 {
            return Err(SlurmError::Option {
                option: "shards",
                message: "must be at least 1".into(),
            });
        }
        let out = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
        let logs = out.join(LOG_DIR);
        let mut s = String::from("#!/bin/bash\n");
        s.push_str("# Written by msc: one array task per shard of the batch below.\n");
        s.push_str(&format!("#SBATCH --job-name={}\n", self.job_name));
        s.push_str(&format!("#SBATCH --array=0-{}\n", self.shards - 1));
        s.push_str("#SBATCH --ntasks=1\n");
        if let Some(g) = &self.gres {
            s.push_str(&format!("#SBATCH --gres={g}\n"));
        }
        if let Some(t) = &self.time {
            s.push_str(&format!("#SBATCH --time={t}\n"));
        }
        if let Some(p) = &self.partition {
            s.push_str(&format!("#SBATCH --partition={p}\n"));
        }
        // %A: the array's job id, %a: the task id.
        s.push_str(&format!("#SBATCH --output={}/%A_%a.out\n", logs.display()));
        s.push_str(&format!("#SBATCH --error={}/%A_%a.err\n", logs.display()));
        s.push_str("set -eu\n");
        s.push_str(&format!("export MSC_SHARD_COUNT={}\n", self.shards));
        s.push_str(&format!(
            "cd {}\n",
            shell_quote(&self.command.cwd.to_string_lossy())
        ));
        let mut words = vec![shell_quote(&self.command.program.to_string_lossy())];
        words.extend(self.command.args.iter().map(|a| shell_quote(a)));
        s.push_str(&format!("exec {}\n", words.join(" ")));
        Ok(s)
    }

    /// Writes the script (and creates the log folder, which Slurm does not) into `out`.
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
    Ok(text.trim().split(';').next().unwrap_or("").to_string())
}

/// An `#SBATCH` value must be one plain word.
fn check_word(option: &'static str, v: &str) -> Result<(), SlurmError> {
    if v.is_empty()
        || v.chars()
            .any(|c| c.is_whitespace() || c == '#' || c == '\'' || c == '"')
    {
        return Err(SlurmError::Option {
            option,
            message: format!("'{v}' must be one word without spaces, quotes or #"),
        });
    }
    Ok(())
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
}
