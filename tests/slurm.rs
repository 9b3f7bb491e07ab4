//! A real one-node Slurm cluster on this host (munged, slurmctld and slurmd started by the
//! test, with a private configuration and ports, and stopped at the end): a 4-task array
//! of `msc sweep` merges into the table of the unsharded sweep, value for value; a shard
//! cancelled midway and resubmitted on its own finishes the batch with nothing lost or
//! redone; a script for an out folder with a space, `%` and shell syntax runs as written.
//!
//! Needs root (the daemons run as root, jobs run as the submitting user) and Debian's
//! `slurm-wlm` and `munge`. Without root it is skipped with a message; without the
//! packages too, except in CI (`CI=true`), where it fails instead.

mod common;

use common::{comparable_table, output_text as text};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Each run: 1152 particles, 400 steps of all-pairs Coulomb on the CPU (about 2 s on one
/// core), so that a task can be cancelled while its second run is under way.
const SCENE: &str = r#"
name = "slurm_torus"
[mesh]
kind = "torus"
major_radius = 1.0
minor_radius = 0.3
rings = 48
sides = 24
[material]
mass = 0.1
stiffness = 10.0
charge = 1e-6
[integrator]
method = "imex"
dt = 0.01
steps = 400
solver = { method = "jacobi", iterations = 20, omega = 0.5, tolerance = 1e-6 }
[coulomb]
method = "all_pairs"
[output]
every = 50
frames = "none"
"#;

const VARY: &str = "integrator.dt=0.002,0.003,0.004,0.005,0.006,0.007,0.008,0.009";
/// Run 6 of the plan (shard 2 of 4 holds runs 2 and 6).
const SHARD2_FIRST: &str = "integrator.dt=0.004";
const SHARD2_SECOND: &str = "integrator.dt=0.008";

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

fn sh(command: &str) -> Output {
    Command::new("sh").arg("-c").arg(command).output().unwrap()
}

/// The daemons this test started; stopped (by process id) when dropped, also on failure.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    children: Vec<Child>,
    munged: Option<u32>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = Command::new("kill").arg(c.id().to_string()).status();
        }
        for c in &mut self.children {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(pid) = self.munged {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
}

impl Cluster {
    /// A command with this cluster's configuration.
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("SLURM_CONF", &self.conf)
            .env("RAYON_NUM_THREADS", "1");
        c
    }

    fn logs(&self) -> String {
        let read = |n: &str| std::fs::read_to_string(self.dir.join(n)).unwrap_or_default();
        let tail = |s: String| {
            s.lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        };
        format!(
            "slurmctld.log:\n{}\nslurmd.log:\n{}",
            tail(read("slurmctld.log")),
            tail(read("slurmd.log"))
        )
    }

    /// Starts munged (unless it runs), slurmctld and slurmd on private ports and state
    /// folders under `dir`, and waits until the node is idle.
    fn start(dir: &Path) -> Cluster {
        let host = text(&sh("hostname -s")).trim().to_string();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mem_mb: u64 = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .map_or(2048, |kb| kb / 1024);
        let mem = mem_mb.saturating_sub(1024).max(512);
        let d = dir.display();
        let conf = dir.join("slurm.conf");
        std::fs::create_dir_all(dir.join("ctld")).unwrap();
        std::fs::create_dir_all(dir.join("d")).unwrap();
        std::fs::write(
            &conf,
            format!(
                "ClusterName=msctest\nSlurmctldHost={host}\nSlurmctldPort=6917\nSlurmdPort=6918\n\
                 AuthType=auth/munge\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
                 SlurmUser=root\nSlurmdUser=root\nStateSaveLocation={d}/ctld\nSlurmdSpoolDir={d}/d\n\
                 SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
                 SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
                 SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
                 AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none\n\
                 ReturnToService=2\nKillWait=5\n\
                 NodeName={host} CPUs={cpus} RealMemory={mem} State=UNKNOWN\n\
                 PartitionName=msctest Nodes={host} Default=YES MaxTime=INFINITE State=UP\n"
            ),
        )
        .unwrap();
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            conf,
            children: Vec::new(),
            munged: None,
        };
        if !sh("pgrep -x munged").status.success() {
            let o = sh(
                "mkdir -p /run/munge && chown munge:munge /run/munge /etc/munge/munge.key \
                        && chmod 400 /etc/munge/munge.key && su -s /bin/sh munge -c munged",
            );
            assert!(o.status.success(), "munged did not start: {}", text(&o));
            // munged forks into the background and then writes its pid file.
            let deadline = Instant::now() + Duration::from_secs(10);
            while cluster.munged.is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
                cluster.munged = std::fs::read_to_string("/run/munge/munged.pid")
                    .ok()
                    .and_then(|p| p.trim().parse().ok());
            }
            assert!(cluster.munged.is_some(), "munged wrote no pid file");
        }
        for daemon in ["slurmctld", "slurmd"] {
            let mut c = cluster.command(daemon);
            c.arg("-D").stdout(Stdio::null()).stderr(Stdio::null());
            if daemon == "slurmctld" {
                c.arg("-c");
            }
            cluster.children.push(c.spawn().expect(daemon));
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let o = cluster
                .command("sinfo")
                .args(["-h", "-o", "%T"])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&o.stdout).trim() == "idle" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the node did not become idle in 60 s: {}\n{}",
                text(&o),
                cluster.logs()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        cluster
    }

    /// `sbatch --wait ARGS`, at most `limit`.
    fn sbatch_wait(&self, args: &[&str], cwd: &Path, limit: Duration) -> Output {
        let o = self
            .command("timeout")
            .arg(limit.as_secs().to_string())
            .arg("sbatch")
            .arg("--wait")
            .args(args)
            .current_dir(cwd)
            .output()
            .unwrap();
        assert_ne!(
            o.status.code(),
            Some(124),
            "sbatch --wait ran past {limit:?}\n{}",
            self.logs()
        );
        o
    }

    /// Waits until the job has left the queue.
    fn wait_gone(&self, job: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let o = self
                .command("squeue")
                .args(["-h", "-j", job])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&o.stdout).trim().is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "job {job} still queued after {limit:?}: {}",
                text(&o)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

fn msc(cluster: &Cluster, args: &[&str], cwd: &Path) -> Output {
    cluster
        .command(env!("CARGO_BIN_EXE_msc"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

fn sweep<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![
        "sweep",
        "scene.toml",
        "--vary",
        VARY,
        "--out",
        out,
        "--backend",
        "cpu",
        "--quiet",
    ];
    a.extend_from_slice(extra);
    a
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn a_slurm_array_sweep_merges_into_the_unsharded_table_and_survives_a_cancelled_shard() {
    if !is_root() {
        eprintln!(
            "skipping: starting a Slurm cluster needs root (run the tests as root, as CI does)"
        );
        return;
    }
    let tools = [
        "sbatch",
        "slurmctld",
        "slurmd",
        "munged",
        "sinfo",
        "squeue",
        "scancel",
    ];
    if let Some(missing) = tools.iter().find(|t| !have(t)) {
        assert!(
            !in_ci(),
            "CI=true but {missing} is missing: install slurm-wlm and munge"
        );
        eprintln!("skipping: {missing} not found (apt-get install slurm-wlm munge)");
        return;
    }
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("scene.toml"), SCENE).unwrap();
    let cluster = Cluster::start(&tmp.path().join("slurm"));
    let limit = Duration::from_secs(240);

    // The unsharded sweep, for reference.
    let o = msc(&cluster, &sweep("whole", &[]), &work);
    assert!(o.status.success(), "{}", text(&o));
    let whole = comparable_table(&read(work.join("whole/runs.csv")));
    assert_eq!(whole.len(), 1 + 8);

    // 1. A 4-task array, run to the end, merges into the same table.
    let o = msc(
        &cluster,
        &sweep("array", &["--slurm", "--shards", "4", "--gres", "none"]),
        &work,
    );
    assert!(o.status.success(), "{}", text(&o));
    let script = work.join("array/slurm-array.sh");
    let o = cluster.sbatch_wait(&[script.to_str().unwrap()], &work, limit);
    assert!(
        o.status.success(),
        "sbatch: {}\n{}",
        text(&o),
        cluster.logs()
    );
    for k in 0..4 {
        let t = read(work.join(format!("array/runs.shard-{k}-of-4.csv")));
        assert_eq!(t.lines().count(), 1 + 2, "shard {k}: {t}");
    }
    let o = msc(&cluster, &["merge", "array"], &work);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(comparable_table(&read(work.join("array/runs.csv"))), whole);

    // 2. The same array, submitted by msc; shard 2 is cancelled once its first run is
    //    done, while its second runs.
    let o = msc(
        &cluster,
        &sweep("cut", &["--submit", "--shards", "4", "--gres", "none"]),
        &work,
    );
    assert!(o.status.success(), "{}", text(&o));
    let said = text(&o);
    let job = said
        .split_whitespace()
        .skip_while(|w| *w != "job")
        .nth(1)
        .unwrap_or_else(|| panic!("no job id in: {said}"))
        .trim_end_matches(';')
        .to_string();
    let first_done = work.join("cut").join(SHARD2_FIRST).join("summary.json");
    let deadline = Instant::now() + limit;
    while !first_done.exists() {
        assert!(
            Instant::now() < deadline,
            "shard 2's first run never finished\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = cluster
        .command("scancel")
        .arg(format!("{job}_2"))
        .output()
        .unwrap();
    assert!(o.status.success(), "scancel: {}", text(&o));
    cluster.wait_gone(&job, limit);
    let second = work.join("cut").join(SHARD2_SECOND).join("summary.json");
    assert!(
        msc::batch::SummaryRecord::read(&second).is_none_or(|s| s.interrupted),
        "shard 2's second run finished before the cancel reached it"
    );
    let o = msc(&cluster, &["merge", "cut"], &work);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = text(&o);
    assert!(
        said.contains(&format!("1 run(s) missing or failed: {SHARD2_SECOND}")),
        "{said}"
    );
    assert!(said.contains("--shard 2/4"), "{said}");

    // Resubmitting task 2 alone finishes only what is missing.
    let script = work.join("cut/slurm-array.sh");
    let o = cluster.sbatch_wait(&["--array=2", script.to_str().unwrap()], &work, limit);
    assert!(
        o.status.success(),
        "sbatch: {}\n{}",
        text(&o),
        cluster.logs()
    );
    let shard2 = read(work.join("cut/runs.shard-2-of-4.csv"));
    let rows: Vec<Vec<String>> = shard2
        .lines()
        .skip(1)
        .map(msc::batch::record::parse_csv_line)
        .collect();
    let header = msc::batch::record::parse_csv_line(shard2.lines().next().unwrap());
    let skipped = header.iter().position(|h| h == "skipped").unwrap();
    let names: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[skipped].as_str()))
        .collect();
    assert_eq!(
        names,
        [(SHARD2_FIRST, "true"), (SHARD2_SECOND, "false")],
        "{shard2}"
    );
    let o = msc(&cluster, &["merge", "cut"], &work);
    assert!(o.status.success(), "{}", text(&o));
    let merged = comparable_table(&read(work.join("cut/runs.csv")));
    assert_eq!(merged, whole);

    // 3. An out folder with a space, '%' (Slurm's filename pattern character) and shell
    //    syntax: sbatch reads the quoted #SBATCH lines back as the folder, the tasks' logs
    //    land in its slurm-logs/ as JOBID_TASK.out, and the tasks run into it.
    let odd = "odd dir 50%x $(touch PWNED)";
    let o = msc(
        &cluster,
        &[
            "sweep",
            "scene.toml",
            "--vary",
            "integrator.dt=0.002,0.003",
            "--steps",
            "20",
            "--out",
            odd,
            "--backend",
            "cpu",
            "--quiet",
            "--slurm",
            "--gres",
            "none",
            "--job-name",
            "odd name #1",
        ],
        &work,
    );
    assert!(o.status.success(), "{}", text(&o));
    let script = work.join(odd).join("slurm-array.sh");
    let o = cluster.sbatch_wait(&["--parsable", script.to_str().unwrap()], &work, limit);
    assert!(
        o.status.success(),
        "sbatch: {}\n{}",
        text(&o),
        cluster.logs()
    );
    let job = String::from_utf8_lossy(&o.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    for k in 0..2 {
        let log = work.join(odd).join(format!("slurm-logs/{job}_{k}.out"));
        assert!(
            log.is_file(),
            "{} missing\n{}",
            log.display(),
            cluster.logs()
        );
    }
    assert!(!work.join("PWNED").exists(), "a command in --out ran");
    let o = msc(&cluster, &["merge", odd], &work);
    assert!(o.status.success(), "{}", text(&o));
    drop(cluster);
    eprintln!(
        "the Slurm test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
