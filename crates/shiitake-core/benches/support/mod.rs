//! What the core benches share: the raw commit baseline on the same SQLite
//! settings, the process's CPU time, and phases timed in interleaved chunks.

#![allow(dead_code, clippy::unwrap_used)] // each bench uses a part

use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

use shiitake_core::LocalSession;
use shiitake_core::store::SessionHeader;
use shiitake_protocol::{EntryId, PromptText, SendOptions, SessionApi, SessionId};
use shiitake_store_sqlite::Durability;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection, SqliteConnection};

/// `SHIITAKE_BENCH_DURABILITY=normal` measures both sides with `synchronous = NORMAL`
/// (no fsync per commit), which isolates the CPU cost; the default is full durability.
pub fn durability() -> (Durability, SqliteSynchronous) {
    match std::env::var("SHIITAKE_BENCH_DURABILITY").as_deref() {
        Ok("normal") => (Durability::Normal, SqliteSynchronous::Normal),
        _ => (Durability::Full, SqliteSynchronous::Full),
    }
}

/// The baseline's database, `raw.db` in `dir`: WAL and the same `synchronous` setting.
pub async fn raw_connection(dir: &Path) -> SqliteConnection {
    let options = SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(dir.join("raw.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(durability().1);
    let mut conn = options.connect().await.unwrap();
    sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

/// `count` raw `BEGIN; INSERT; COMMIT`s; returns the time they took.
pub async fn raw_commits(conn: &mut SqliteConnection, count: usize) -> Duration {
    let started = Instant::now();
    for n in 0..count {
        let mut tx = conn.begin().await.unwrap();
        sqlx::query("INSERT INTO t (payload) VALUES (?)")
            .bind(format!("{{\"type\":\"prompt\",\"text\":\"prompt {n}\"}}"))
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    started.elapsed()
}

/// CPU time this process's live threads have used so far, in seconds.
///
/// Summed from each thread's `/proc/self/task/*/schedstat` (nanoseconds), since
/// `/proc/self/stat` counts in 10 ms ticks, too coarse for a chunk of a few
/// milliseconds; falls back to those ticks where schedstat is missing. A thread that
/// exited mid-chunk takes its time with it, so chunks should not straddle thread exits
/// (the benches' threads live as long as their Agents).
pub fn cpu_seconds() -> f64 {
    let threads = std::fs::read_dir("/proc/self/task").into_iter().flatten();
    // A thread that exits between the listing and its read is skipped.
    let nanos: u64 = threads
        .flatten()
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum();
    if nanos > 0 {
        nanos as f64 / 1e9
    } else {
        tick_seconds()
    }
}

/// CPU time (user + system) from `/proc/self/stat`, in 10 ms ticks.
fn tick_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime is the 12th, stime the 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |n: usize| {
        fields
            .get(n)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// The machine's load averages, for the printout.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// One phase's chunks: how long each took, and the CPU it used.
#[derive(Default)]
pub struct Phase {
    pub chunks: Vec<Duration>,
    pub cpu: f64,
}

impl Phase {
    /// Times one chunk and adds the CPU it used.
    pub async fn time<F: std::future::Future<Output = Duration>>(&mut self, chunk: F) {
        let cpu = cpu_seconds();
        self.chunks.push(chunk.await);
        self.cpu += cpu_seconds() - cpu;
    }

    /// Items per second over all chunks, each chunk `per_chunk` items.
    pub fn rate(&self, per_chunk: usize) -> f64 {
        let total: Duration = self.chunks.iter().sum();
        (per_chunk * self.chunks.len()) as f64 / total.as_secs_f64()
    }

    /// CPU microseconds per item.
    pub fn cpu_micros(&self, per_chunk: usize) -> f64 {
        self.cpu * 1e6 / (per_chunk * self.chunks.len()) as f64
    }

    /// Per-round ratios of this phase's rate to `other`'s.
    pub fn ratios<'a>(
        &'a self,
        per_chunk: usize,
        other: &'a Phase,
        other_per_chunk: usize,
    ) -> impl Iterator<Item = f64> + 'a {
        self.chunks
            .iter()
            .zip(&other.chunks)
            .map(move |(mine, theirs)| {
                (per_chunk as f64 / mine.as_secs_f64())
                    / (other_per_chunk as f64 / theirs.as_secs_f64())
            })
    }
}

/// Sends `prompt {n}` to `session` and waits for its acceptance.
pub async fn send_prompt(session: &LocalSession, n: usize) {
    session
        .send(
            PromptText::new(format!("prompt {n}")).unwrap(),
            SendOptions::default(),
        )
        .await
        .unwrap();
}

/// Every Session's caller sends `per_caller` prompts (`prompt 0`, `prompt 1`, …),
/// all callers at once; returns the time until every one was accepted.
pub async fn many_callers(sessions: &[LocalSession], per_caller: usize) -> Duration {
    let started = Instant::now();
    let tasks: Vec<_> = sessions
        .iter()
        .cloned()
        .map(|session| {
            tokio::spawn(async move {
                for n in 0..per_caller {
                    send_prompt(&session, n).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    started.elapsed()
}

/// The header of a Session written straight through the store with `messages`
/// entries ([`entry_id`] 1 to `messages`), created and last active at `at`.
pub fn header(id: &SessionId, messages: usize, at: u64) -> SessionHeader {
    SessionHeader {
        title: format!("session {at}"),
        head_sequence: messages as u64,
        leaf: (messages > 0).then(|| entry_id(messages)),
        ..SessionHeader::new(id.clone(), at)
    }
}

/// The id of a Session's `n`th entry written straight through the store.
pub fn entry_id(n: usize) -> EntryId {
    EntryId::new(format!("ent_{n:08}")).unwrap()
}

/// The database's bytes after a WAL checkpoint.
pub async fn checkpointed_bytes(path: &Path) -> u64 {
    let options = SqliteConnectOptions::from_str("sqlite://")
        .unwrap()
        .filename(path);
    let mut conn = options.connect().await.unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    std::fs::metadata(path).unwrap().len()
}
