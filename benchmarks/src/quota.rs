//! A CPU quota for a child process, as a container gets one: a cgroup v1
//! `cpu` group with a CFS quota (`examples/lock_quota.rs`).
//!
//! The group's threads may run `cpu.cfs_quota_us` of CPU time in every
//! `cpu.cfs_period_us` (100 ms here), summed over all of them; once that is
//! spent, every one of them waits for the next period ("throttled", counted
//! in the group's `cpu.stat`). cgroup v1 only: [`cpu_hierarchy`] says so,
//! as an error, on a machine that has only cgroup v2 (`cpu.max`), or when
//! not root.

use std::fs;
use std::path::{Path, PathBuf};

/// The CFS period of every group made here: 100 ms, the kernel's default.
pub const PERIOD_US: u64 = 100_000;

/// The mount point of the cgroup v1 `cpu` controller (usually
/// `/sys/fs/cgroup/cpu`), checked usable: CFS bandwidth control present,
/// and this process root.
///
/// # Errors
///
/// A sentence saying what is missing and what to do: no cgroup v1 `cpu`
/// controller mounted, no `cpu.cfs_quota_us` in it, or not root.
pub fn cpu_hierarchy() -> Result<PathBuf, String> {
    let mounts = fs::read_to_string("/proc/mounts").map_err(|e| {
        format!("cannot read /proc/mounts to find cgroup v1's `cpu` controller: {e}")
    })?;
    let Some(mount) = cpu_mount(&mounts) else {
        let v2 = mounts
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some("cgroup2"));
        return Err(format!(
            "no cgroup v1 `cpu` controller is mounted (none in /proc/mounts{}): this benchmark \
             limits its child processes with cgroup v1's cpu.cfs_quota_us; run it on a host with \
             cgroup v1, or mount the controller: \
             `mkdir -p /sys/fs/cgroup/cpu && mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu`",
            if v2 {
                "; only cgroup v2, whose `cpu.max` this tool does not drive"
            } else {
                ""
            }
        ));
    };
    if !mount.join("cpu.cfs_quota_us").exists() {
        return Err(format!(
            "{} has no cpu.cfs_quota_us: this kernel has no CFS bandwidth control \
             (CONFIG_CFS_BANDWIDTH), so there is no CPU quota to measure under",
            mount.display()
        ));
    }
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(format!(
            "not root: creating a cgroup under {} and moving processes into it needs root \
             (e.g. `sudo -E \"$(command -v cargo)\" run --release -p tiered-timer-benchmarks --example lock_quota`)",
            mount.display()
        ));
    }
    Ok(mount)
}

/// The mount point of the cgroup v1 hierarchy with the `cpu` controller,
/// from the text of `/proc/mounts`.
fn cpu_mount(mounts: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, mount, "cgroup", options, ..] if options.split(',').any(|o| o == "cpu") => {
                Some(PathBuf::from(mount))
            }
            _ => None,
        }
    })
}

/// A cgroup v1 `cpu` group with a quota, removed when dropped (it must be
/// empty by then: wait for the processes put in it).
#[derive(Debug)]
pub struct CpuGroup {
    dir: PathBuf,
    /// The group's path as `/proc/<pid>/cgroup` shows it: `/<name>`.
    relative: String,
}

impl CpuGroup {
    /// Makes the group `name` under `hierarchy` (from [`cpu_hierarchy`])
    /// allowed `cpus` CPUs (0.5: 50 ms of every 100 ms), or unlimited for
    /// `None`. A stale empty group of that name is replaced.
    ///
    /// # Errors
    ///
    /// The group could not be made or configured (the path and the
    /// system's error), or `cpus` is below 0.01.
    pub fn create(hierarchy: &Path, name: &str, cpus: Option<f64>) -> Result<CpuGroup, String> {
        let dir = hierarchy.join(name);
        if dir.exists() {
            fs::remove_dir(&dir).map_err(|e| {
                format!(
                    "a group {} is left from an earlier run and cannot be removed: {e}",
                    dir.display()
                )
            })?;
        }
        fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let group = CpuGroup {
            dir,
            relative: format!("/{name}"),
        };
        let quota = match cpus {
            None => "-1".to_string(),
            Some(c) if c >= 0.01 => ((c * PERIOD_US as f64).round() as u64).to_string(),
            Some(c) => {
                return Err(format!(
                    "a quota of {c} CPU is below the 0.01 CPU the kernel allows"
                ))
            }
        };
        group.write("cpu.cfs_period_us", &PERIOD_US.to_string())?;
        group.write("cpu.cfs_quota_us", &quota)?;
        Ok(group)
    }

    /// The group's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Moves process `pid`, all its threads, into the group.
    ///
    /// # Errors
    ///
    /// The kernel refused (the process is gone, or not ours to move).
    pub fn add(&self, pid: u32) -> Result<(), String> {
        self.write("cgroup.procs", &pid.to_string())?;
        if self.holds(pid) {
            Ok(())
        } else {
            Err(format!(
                "process {pid} is not in {} after writing it to cgroup.procs",
                self.dir.display()
            ))
        }
    }

    /// Whether `/proc/<pid>/cgroup` puts process `pid` in this group.
    pub fn holds(&self, pid: u32) -> bool {
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return false;
        };
        text.lines().any(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next(), fields.next(), fields.next());
            controllers.is_some_and(|c| c.split(',').any(|c| c == "cpu"))
                && path == Some(self.relative.as_str())
        })
    }

    /// The group's throttling counters so far.
    ///
    /// # Errors
    ///
    /// `cpu.stat` could not be read.
    pub fn stat(&self) -> Result<CpuStat, String> {
        let path = self.dir.join("cpu.stat");
        fs::read_to_string(&path)
            .map(|text| CpuStat::parse(&text))
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        let path = self.dir.join(file);
        fs::write(&path, value)
            .map_err(|e| format!("cannot write {value} to {}: {e}", path.display()))
    }
}

impl Drop for CpuGroup {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir(&self.dir) {
            eprintln!("could not remove the cgroup {}: {e}", self.dir.display());
        }
    }
}

/// A group's CFS counters (its `cpu.stat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStat {
    /// Periods in which the group's threads were runnable (`nr_periods`).
    pub periods: u64,
    /// Periods in which they used the whole quota and were stopped until
    /// the next (`nr_throttled`).
    pub throttled_periods: u64,
    /// Time they spent stopped so (`throttled_time`), in ns.
    pub throttled_ns: u64,
}

impl CpuStat {
    /// Reads the text of a `cpu.stat` (unknown lines ignored).
    pub fn parse(text: &str) -> CpuStat {
        let mut stat = CpuStat::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            let (Some(key), Some(Ok(value))) = (words.next(), words.next().map(str::parse::<u64>))
            else {
                continue;
            };
            match key {
                "nr_periods" => stat.periods = value,
                "nr_throttled" => stat.throttled_periods = value,
                "throttled_time" => stat.throttled_ns = value,
                _ => {}
            }
        }
        stat
    }

    /// The counts from `earlier` to `self`.
    pub fn since(self, earlier: CpuStat) -> CpuStat {
        CpuStat {
            periods: self.periods.saturating_sub(earlier.periods),
            throttled_periods: self
                .throttled_periods
                .saturating_sub(earlier.throttled_periods),
            throttled_ns: self.throttled_ns.saturating_sub(earlier.throttled_ns),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_v1_cpu_controller_only() {
        let v1 = "\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";
        assert_eq!(cpu_mount(v1), Some(PathBuf::from("/sys/fs/cgroup/cpu")));
        let joint = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n";
        assert_eq!(
            cpu_mount(joint),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"))
        );
        let v2_only = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev 0 0\n";
        assert_eq!(cpu_mount(v2_only), None);
        let cpuset_only = "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n";
        assert_eq!(cpu_mount(cpuset_only), None);
    }

    #[test]
    fn reads_and_subtracts_cpu_stat() {
        let before =
            CpuStat::parse("nr_periods 10\nnr_throttled 2\nthrottled_time 5000\nnr_bursts 0\n");
        assert_eq!(
            before,
            CpuStat {
                periods: 10,
                throttled_periods: 2,
                throttled_ns: 5000
            }
        );
        let after = CpuStat::parse("nr_periods 25\nnr_throttled 9\nthrottled_time 80000\n");
        assert_eq!(
            after.since(before),
            CpuStat {
                periods: 15,
                throttled_periods: 7,
                throttled_ns: 75000
            }
        );
    }
}
