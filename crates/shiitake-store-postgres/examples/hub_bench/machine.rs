//! The whole machine's CPU time, from `/proc/stat`: what every process (the Hub's,
//! PostgreSQL's, this benchmark's clients) spent together during a phase, so a rate
//! can be read against the cores it had, and each kind of process's share of it, from
//! `/proc/<pid>/stat` (Linux only; elsewhere nothing is measured).

use std::time::Duration;

/// The kernel's clock ticks per second for `/proc/stat` (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// The processes whose CPU is told apart, by their command name.
pub(crate) const KINDS: [(&str, &str); 3] = [
    ("hub_node", "the Hub's processes"),
    ("postgres", "PostgreSQL"),
    ("hub_bench", "the benchmark's callers"),
];

/// CPU ticks of all cores so far: busy (everything but idle and I/O wait) and in all,
/// and those of each of [`KINDS`] (user and system time of its processes).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuTicks {
    busy: u64,
    total: u64,
    kinds: [u64; KINDS.len()],
}

impl CpuTicks {
    /// The ticks now; zero when `/proc/stat` cannot be read.
    pub(crate) fn now() -> Self {
        let mut ticks = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|stat| Self::parse(&stat))
            .unwrap_or_default();
        ticks.kinds = kinds();
        ticks
    }

    /// The first line of `/proc/stat`: `cpu user nice system idle iowait irq softirq steal …`.
    fn parse(stat: &str) -> Option<Self> {
        let line = stat.lines().next()?.strip_prefix("cpu ")?;
        let ticks: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // guest and guest_nice (9th and 10th) are already counted in user and nice.
        let counted = &ticks[..ticks.len().min(8)];
        let total: u64 = counted.iter().sum();
        let idle = counted.get(3).copied().unwrap_or(0) + counted.get(4).copied().unwrap_or(0);
        Some(Self {
            busy: total - idle,
            total,
            kinds: [0; KINDS.len()],
        })
    }

    /// The ticks between `earlier` and now (this).
    pub(crate) fn since(self, earlier: Self) -> Self {
        Self {
            busy: self.busy.saturating_sub(earlier.busy),
            total: self.total.saturating_sub(earlier.total),
            kinds: std::array::from_fn(|at| self.kinds[at].saturating_sub(earlier.kinds[at])),
        }
    }

    pub(crate) fn plus(self, other: Self) -> Self {
        Self {
            busy: self.busy + other.busy,
            total: self.total + other.total,
            kinds: std::array::from_fn(|at| self.kinds[at] + other.kinds[at]),
        }
    }

    /// The CPU time of each of [`KINDS`], in their order.
    pub(crate) fn kind_times(self) -> [Duration; KINDS.len()] {
        self.kinds.map(seconds)
    }

    /// The share of the machine's cores that was busy.
    pub(crate) fn busy_share(self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let share = self.busy as f64 / self.total.max(1) as f64;
        share
    }

    /// The busy CPU time, all cores together.
    pub(crate) fn busy_time(self) -> Duration {
        seconds(self.busy)
    }
}

fn seconds(ticks: u64) -> Duration {
    #[allow(clippy::cast_precision_loss)]
    let seconds = ticks as f64 / TICKS_PER_SECOND;
    Duration::from_secs_f64(seconds)
}

/// The user and system ticks so far of every process of each of [`KINDS`].
fn kinds() -> [u64; KINDS.len()] {
    let mut kinds = [0; KINDS.len()];
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return kinds;
    };
    for entry in entries.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((name, ticks)) = process_ticks(&stat)
            && let Some(at) = KINDS.iter().position(|(kind, _)| *kind == name)
        {
            kinds[at] += ticks;
        }
    }
    kinds
}

/// A process's command name and user + system ticks from its `stat` line:
/// `pid (comm) state ppid … utime stime …`, utime and stime the 14th and 15th fields
/// (the 12th and 13th after the name, which may hold spaces and parentheses).
fn process_ticks(stat: &str) -> Option<(&str, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?;
    let mut fields = stat.get(close + 1..)?.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((name, user + system))
}
