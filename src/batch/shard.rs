//! Splitting a plan into shards (`--shard K/N`, or a Slurm array task's environment):
//! run `i` of the plan (0-based, plan order) belongs to shard `i mod N`, so a shard's runs
//! depend only on the plan and N, never on which runs are done (stable under resume).

use super::BatchError;

/// Shard `index` of `count` (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Parses `K/N` with `0 <= K < N`.
    pub fn parse(arg: &str) -> Result<Self, BatchError> {
        let err = |message: &str| BatchError::Shard {
            arg: arg.to_string(),
            message: message.to_string(),
        };
        let (k, n) = arg
            .split_once('/')
            .ok_or_else(|| err("expected K/N, e.g. 0/4 (shard K of N, counted from 0)"))?;
        let k: usize = k.trim().parse().map_err(|_| err("K is not a number"))?;
        let n: usize = n.trim().parse().map_err(|_| err("N is not a number"))?;
        Self::new(k, n).map_err(|m| err(&m))
    }

    fn new(index: usize, count: usize) -> Result<Self, String> {
        if count == 0 {
            return Err("N must be at least 1".into());
        }
        if index >= count {
            return Err(format!("K must be below N (0 to {})", count - 1));
        }
        Ok(Self { index, count })
    }

    /// The shard of a Slurm array task: `SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN` of
    /// `SLURM_ARRAY_TASK_COUNT`. `None` outside an array task; an error when the variables
    /// are there but inconsistent (an array with gaps, such as `--array=0,2`, cannot be
    /// mapped onto shards; resubmitting single tasks of a full array, `--array=2`, can: see
    /// [`Self::from_vars`]).
    pub fn from_env() -> Result<Option<Self>, BatchError> {
        let var = |k: &str| std::env::var(k).ok();
        Self::from_vars(
            var("SLURM_ARRAY_TASK_ID").as_deref(),
            var("SLURM_ARRAY_TASK_MIN").as_deref(),
            var("SLURM_ARRAY_TASK_COUNT").as_deref(),
            var("MSC_SHARD_COUNT").as_deref(),
        )
    }

    /// [`Self::from_env`] on given values. `shard_count` (`MSC_SHARD_COUNT`, which the
    /// scripts of `--slurm` export) wins over the array's size, so that a resubmitted
    /// single task (`sbatch --array=2 job.sh`, an array of one) is still shard 2 of N.
    pub fn from_vars(
        task_id: Option<&str>,
        task_min: Option<&str>,
        task_count: Option<&str>,
        shard_count: Option<&str>,
    ) -> Result<Option<Self>, BatchError> {
        let Some(id) = task_id else {
            return Ok(None);
        };
        let err = |message: String| BatchError::Shard {
            arg: format!(
                "SLURM_ARRAY_TASK_ID={id} SLURM_ARRAY_TASK_MIN={} SLURM_ARRAY_TASK_COUNT={}{}",
                task_min.unwrap_or("(unset)"),
                task_count.unwrap_or("(unset)"),
                shard_count
                    .map(|n| format!(" MSC_SHARD_COUNT={n}"))
                    .unwrap_or_default()
            ),
            message,
        };
        let num = |name: &str, v: Option<&str>| -> Result<usize, BatchError> {
            v.ok_or_else(|| err(format!("{name} is not set")))?
                .trim()
                .parse()
                .map_err(|_| err(format!("{name} is not a number")))
        };
        let id = num("SLURM_ARRAY_TASK_ID", Some(id))?;
        let shard = match shard_count {
            // Our own script: the task id is the shard, whatever the array's size.
            Some(n) => Self::new(id, num("MSC_SHARD_COUNT", Some(n))?),
            None => {
                let min = num("SLURM_ARRAY_TASK_MIN", task_min)?;
                let count = num("SLURM_ARRAY_TASK_COUNT", task_count)?;
                let index = id
                    .checked_sub(min)
                    .ok_or_else(|| err("the task id is below the array's minimum".into()))?;
                Self::new(index, count)
            }
        };
        shard.map(Some).map_err(err)
    }

    /// Whether run `i` of the plan (plan order, from 0) is this shard's.
    pub fn owns(&self, i: usize) -> bool {
        i % self.count == self.index
    }

    /// The shard's own table in the batch folder.
    pub fn table_name(&self) -> String {
        format!("runs.shard-{}-of-{}.csv", self.index, self.count)
    }

    /// `K/N`, as `--shard` takes it.
    pub fn arg(&self) -> String {
        format!("{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_plan() {
        let n = 4;
        let shards: Vec<Shard> = (0..n)
            .map(|k| Shard::parse(&format!("{k}/{n}")).unwrap())
            .collect();
        for i in 0..37 {
            let owners = shards.iter().filter(|s| s.owns(i)).count();
            assert_eq!(owners, 1, "run {i}");
        }
        // Shard sizes differ by at most one.
        let sizes: Vec<usize> = shards
            .iter()
            .map(|s| (0..37).filter(|&i| s.owns(i)).count())
            .collect();
        assert_eq!(sizes.iter().sum::<usize>(), 37);
        assert!(
            sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
            "{sizes:?}"
        );
    }

    #[test]
    fn bad_shard_arguments_are_typed_errors() {
        for bad in ["4/4", "1", "a/2", "0/0", "-1/3"] {
            assert!(
                matches!(Shard::parse(bad), Err(BatchError::Shard { .. })),
                "{bad}"
            );
        }
        assert_eq!(Shard::parse(" 3/8").unwrap(), Shard { index: 3, count: 8 });
    }

    #[test]
    fn slurm_variables_give_the_shard() {
        assert_eq!(Shard::from_vars(None, None, None, None).unwrap(), None);
        // An array 5-8: task 7 is shard 2 of 4.
        let s = Shard::from_vars(Some("7"), Some("5"), Some("4"), None).unwrap();
        assert_eq!(s, Some(Shard { index: 2, count: 4 }));
        // A resubmitted single task of our script: still shard 2 of 4.
        let s = Shard::from_vars(Some("2"), Some("2"), Some("1"), Some("4")).unwrap();
        assert_eq!(s, Some(Shard { index: 2, count: 4 }));
        assert!(Shard::from_vars(Some("9"), Some("5"), Some("4"), None).is_err());
        assert!(Shard::from_vars(Some("3"), None, Some("4"), None).is_err());
        assert!(Shard::from_vars(Some("4"), Some("4"), Some("1"), Some("4")).is_err());
    }
}
