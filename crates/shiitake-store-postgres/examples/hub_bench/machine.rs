//! The whole machine's CPU time, from `/proc/stat`: what every process (the Hub's,
//! PostgreSQL's, this benchmark's clients) spent together during a phase, so a rate
//! can be read against the cores it had (Linux only; elsewhere nothing is measured).

use std::time::Duration;

/// The kernel's clock ticks per second for `/proc/stat` (`USER_HZ`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU ticks of all cores so far: busy (everything but idle and I/O wait) and in all.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuTicks {
    busy: u64,
    total: u64,
}

impl CpuTicks {
    /// The ticks now; zero when `/proc/stat` cannot be read.
    pub(crate) fn now() -> Self {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|stat| Self::parse(&stat))
            .unwrap_or_default()
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
        })
    }

    /// The ticks between `earlier` and now (this).
    pub(crate) fn since(self, earlier: Self) -> Self {
        Self {
            busy: self.busy.saturating_sub(earlier.busy),
            total: self.total.saturating_sub(earlier.total),
        }
    }

    pub(crate) fn plus(self, other: Self) -> Self {
        Self {
            busy: self.busy + other.busy,
            total: self.total + other.total,
        }
    }

    /// The share of the machine's cores that was busy.
    pub(crate) fn busy_share(self) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let share = self.busy as f64 / self.total.max(1) as f64;
        share
    }

    /// The busy CPU time, all cores together.
    pub(crate) fn busy_time(self) -> Duration {
        #[allow(clippy::cast_precision_loss)]
        let seconds = self.busy as f64 / TICKS_PER_SECOND;
        Duration::from_secs_f64(seconds)
    }
}
