//! `serve --database`: where the Agent's Sessions live, and the store opened there.
//!
//! `sqlite:PATH` is the Local host's embedded store (the default is `shiitake.db`
//! in the data directory); `postgres://…` is a database several `serve` processes
//! share, each owning some Sessions under leases (crate `shiitake-store-postgres`,
//! compiled in by the default cargo feature `postgres`), with the lease period and
//! heartbeat of `--lease-ttl` and `--heartbeat`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use shiitake_roster_hub::HubLimits;

/// A parsed `--database` value.
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (its URL may carry a password, so `Debug` hides it).
    Postgres(Postgres),
}

/// A PostgreSQL database and how this process keeps its leases there.
#[derive(Clone, PartialEq, Eq)]
pub struct Postgres {
    url: String,
    /// `--lease-ttl`, if given.
    lease_ttl: Option<Duration>,
    /// `--heartbeat`, if given.
    heartbeat: Option<Duration>,
    /// The directory's bounds: `--max-open-tenants`, `--tenant-idle`,
    /// `--max-agents-per-tenant` over the defaults.
    limits: HubLimits,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            Self::Postgres(_) => f.write_str("Postgres(..)"),
        }
    }
}

/// `serve`'s flags for a PostgreSQL database (the Hub, `docs/hub.md`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct HubArgs {
    /// How long a Session's lease lasts unrenewed (PostgreSQL only; 500ms to 600s,
    /// default 10s): a process that is paused, not dead, keeps its Sessions this long.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    lease_ttl: Option<Duration>,
    /// How often this process beats and looks for processes that died (PostgreSQL
    /// only; 50ms to half the lease, default 500ms or half the lease): a dead process's
    /// Sessions are taken over within about this.
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    heartbeat: Option<Duration>,
    /// Most tenants this process holds open at once (PostgreSQL only; default 256):
    /// one more closes the least recently used idle one, or is answered unavailable.
    #[arg(long, value_name = "N")]
    max_open_tenants: Option<usize>,
    /// How long a tenant with no work stays open unused (PostgreSQL only; default 10m).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    tenant_idle: Option<Duration>,
    /// Most Agents one tenant may have; `agents.create` is refused at it (PostgreSQL
    /// only; default 16).
    #[arg(long, value_name = "N")]
    max_agents_per_tenant: Option<usize>,
}

impl HubArgs {
    /// Whether any flag of a PostgreSQL Hub was given.
    fn any(&self) -> bool {
        self.lease_ttl.is_some()
            || self.heartbeat.is_some()
            || self.max_open_tenants.is_some()
            || self.tenant_idle.is_some()
            || self.max_agents_per_tenant.is_some()
    }

    /// The directory's bounds these flags set over the defaults.
    fn limits(&self) -> HubLimits {
        let defaults = HubLimits::default();
        HubLimits {
            max_open_tenants: self.max_open_tenants.unwrap_or(defaults.max_open_tenants),
            idle: self.tenant_idle.unwrap_or(defaults.idle),
            max_agents_per_tenant: self
                .max_agents_per_tenant
                .unwrap_or(defaults.max_agents_per_tenant),
            ..defaults
        }
    }
}

/// A duration as `--lease-ttl`, `--heartbeat` and `--drain-timeout` take it: a whole
/// number and a unit, `ms`, `s` or `m` (`1500ms`, `10s`, `2m`).
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let bad = || format!("expected a whole number and ms, s or m (1500ms, 10s, 2m), not {text:?}");
    let number: u64 = number.parse().map_err(|_| bad())?;
    let millis = match unit {
        "ms" => Some(number),
        "s" => number.checked_mul(1_000),
        "m" => number.checked_mul(60_000),
        _ => None,
    }
    .ok_or_else(bad)?;
    Ok(Duration::from_millis(millis))
}

/// Why a `--database` value was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DatabaseError {
    /// Neither `sqlite:` nor `postgres://`/`postgresql://`.
    #[error("--database takes sqlite:PATH or postgres://USER@HOST:PORT/NAME, not {0:?}")]
    Scheme(String),
    /// `sqlite:` with nothing after it.
    #[error("--database sqlite: needs a file path after the colon")]
    EmptyPath,
    /// `--lease-ttl`, `--heartbeat` or a tenant bound with a database that has no
    /// leases and no tenants.
    #[error(
        "--lease-ttl, --heartbeat, --max-open-tenants, --tenant-idle and --max-agents-per-tenant apply to a PostgreSQL database (--database postgres://…) only"
    )]
    TimingWithoutLeases,
    /// A tenant bound the directory cannot run with.
    #[error("{0}")]
    Limits(String),
    /// The lease and heartbeat are outside their bounds.
    #[error("{0}")]
    Timing(String),
}

impl Database {
    /// Reads a `--database` value; `None` is the default file in `data_dir`.
    pub fn parse(value: Option<&str>, data_dir: &Path) -> Result<Self, DatabaseError> {
        let Some(value) = value.map(str::trim) else {
            return Ok(Self::Sqlite(data_dir.join("shiitake.db")));
        };
        if let Some(path) = value.strip_prefix("sqlite:") {
            // `sqlite://PATH` is accepted too, as sqlx spells it.
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(DatabaseError::EmptyPath);
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if value.starts_with("postgres://") || value.starts_with("postgresql://") {
            return Ok(Self::Postgres(Postgres {
                url: value.to_owned(),
                lease_ttl: None,
                heartbeat: None,
                limits: HubLimits::default(),
            }));
        }
        // Only the scheme is echoed: the rest may hold a password.
        let scheme = value.split_once(':').map_or(value, |(scheme, _)| scheme);
        Err(DatabaseError::Scheme(scheme.to_owned()))
    }

    /// What `serve` prints about it (never a password).
    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite(path) => format!("SQLite {}", path.display()),
            Self::Postgres(database) => database.describe(),
        }
    }

    /// Takes `--lease-ttl` and `--heartbeat`, refused with SQLite (it has no leases)
    /// or outside their bounds, before anything starts.
    pub fn with_hub(self, hub: &HubArgs) -> Result<Self, DatabaseError> {
        match self {
            Self::Sqlite(_) if hub.any() => Err(DatabaseError::TimingWithoutLeases),
            Self::Sqlite(path) => Ok(Self::Sqlite(path)),
            Self::Postgres(database) => {
                let database = Postgres {
                    lease_ttl: hub.lease_ttl,
                    heartbeat: hub.heartbeat,
                    limits: hub.limits(),
                    ..database
                };
                database
                    .limits
                    .check()
                    .map_err(|error| DatabaseError::Limits(error.to_string()))?;
                database.check()?;
                Ok(Self::Postgres(database))
            }
        }
    }
}

impl Postgres {
    /// Checks the lease and heartbeat this process would run with.
    #[cfg(feature = "postgres")]
    fn check(&self) -> Result<(), DatabaseError> {
        let (lease_ttl, heartbeat) = self.timing();
        shiitake_store_postgres::check_timing(lease_ttl, heartbeat)
            .map_err(|error| DatabaseError::Timing(error.to_string()))
    }

    /// Without PostgreSQL, opening it fails later with that reason.
    #[cfg(not(feature = "postgres"))]
    fn check(&self) -> Result<(), DatabaseError> {
        Ok(())
    }

    /// The tenant directory's bounds.
    pub fn limits(&self) -> HubLimits {
        self.limits
    }

    /// The database's URL (it may hold a password: never print it, see [`Self::describe`]).
    #[cfg(feature = "postgres")]
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What `serve` prints about it (never a password).
    pub fn describe(&self) -> String {
        format!("PostgreSQL {}", without_password(&self.url))
    }

    /// The lease and heartbeat: as given, else the store's defaults (the heartbeat's
    /// shortened to half a short lease).
    #[cfg(feature = "postgres")]
    pub fn timing(&self) -> (Duration, Duration) {
        let lease_ttl = self.lease_ttl.unwrap_or(DEFAULT_LEASE_TTL);
        let heartbeat = self
            .heartbeat
            .unwrap_or_else(|| shiitake_store_postgres::default_heartbeat(lease_ttl));
        (lease_ttl, heartbeat)
    }
}

/// The lease period without `--lease-ttl`.
#[cfg(feature = "postgres")]
const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// The URL with any password replaced by `***`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _password)) => format!("{scheme}://{name}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_to_their_store() {
        let dir = Path::new("/data");
        assert_eq!(
            Database::parse(None, dir),
            Ok(Database::Sqlite(PathBuf::from("/data/shiitake.db")))
        );
        assert_eq!(
            Database::parse(Some("sqlite:/tmp/a.db"), dir),
            Ok(Database::Sqlite(PathBuf::from("/tmp/a.db")))
        );
        assert_eq!(
            Database::parse(Some("sqlite://rel/a.db"), dir),
            Ok(Database::Sqlite(PathBuf::from("rel/a.db")))
        );
        assert_eq!(
            Database::parse(Some("postgres://u@h:5432/db"), dir),
            Ok(postgres("postgres://u@h:5432/db"))
        );
        assert_eq!(
            Database::parse(Some("postgresql://h/db"), dir),
            Ok(postgres("postgresql://h/db"))
        );
    }

    #[test]
    fn bad_values_are_refused_without_echoing_secrets() {
        let dir = Path::new("/data");
        assert_eq!(
            Database::parse(Some("sqlite:"), dir),
            Err(DatabaseError::EmptyPath)
        );
        assert_eq!(
            Database::parse(Some("mysql://root:hunter2@h/db"), dir),
            Err(DatabaseError::Scheme("mysql".to_owned()))
        );
        assert_eq!(
            Database::parse(Some("/tmp/a.db"), dir),
            Err(DatabaseError::Scheme("/tmp/a.db".to_owned()))
        );
    }

    #[test]
    fn passwords_are_hidden_when_described() {
        assert_eq!(
            postgres("postgres://u:hunter2@h:5/db").describe(),
            "PostgreSQL postgres://u:***@h:5/db"
        );
        assert_eq!(
            postgres("postgres://u@h/db").describe(),
            "PostgreSQL postgres://u@h/db"
        );
        assert_eq!(
            format!("{:?}", postgres("postgres://u:hunter2@h/db")),
            "Postgres(..)"
        );
    }

    fn postgres(url: &str) -> Database {
        Database::Postgres(Postgres {
            url: url.to_owned(),
            lease_ttl: None,
            heartbeat: None,
            limits: HubLimits::default(),
        })
    }

    fn hub(lease_ttl: Option<u64>, heartbeat: Option<u64>) -> HubArgs {
        HubArgs {
            lease_ttl: lease_ttl.map(Duration::from_millis),
            heartbeat: heartbeat.map(Duration::from_millis),
            ..HubArgs::default()
        }
    }

    #[test]
    fn durations_take_a_whole_number_and_a_unit() {
        assert_eq!(duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("0ms"), Ok(Duration::ZERO));
        for bad in [
            "",
            "10",
            "s",
            "1.5s",
            "-1s",
            "10 s",
            "10h",
            "99999999999999999999ms",
        ] {
            assert!(duration(bad).is_err(), "{bad:?}");
        }
        assert!(
            duration(&format!("{}m", u64::MAX / 1000)).is_err(),
            "overflow"
        );
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn lease_and_heartbeat_are_checked_before_anything_starts() {
        let sqlite = Database::Sqlite(PathBuf::from("/data/shiitake.db"));
        assert_eq!(
            sqlite.clone().with_hub(&hub(Some(10_000), None)),
            Err(DatabaseError::TimingWithoutLeases)
        );
        assert_eq!(
            sqlite.clone().with_hub(&hub(None, Some(500))),
            Err(DatabaseError::TimingWithoutLeases)
        );
        assert_eq!(sqlite.clone().with_hub(&HubArgs::default()), Ok(sqlite));
        let pg = postgres("postgres://h/db");
        assert!(pg.clone().with_hub(&HubArgs::default()).is_ok());
        // A short lease shortens the default heartbeat with it.
        assert!(pg.clone().with_hub(&hub(Some(500), None)).is_ok());
        assert!(pg.clone().with_hub(&hub(Some(499), None)).is_err());
        assert!(pg.clone().with_hub(&hub(Some(600_000), None)).is_ok());
        assert!(pg.clone().with_hub(&hub(Some(600_001), None)).is_err());
        assert!(pg.clone().with_hub(&hub(None, Some(5_000))).is_ok());
        let refused = pg.clone().with_hub(&hub(None, Some(5_001)));
        assert!(
            matches!(&refused, Err(DatabaseError::Timing(reason)) if reason.contains("half the lease")),
            "{refused:?}"
        );
        assert!(pg.clone().with_hub(&hub(Some(2_000), Some(2_000))).is_err());
        assert!(pg.clone().with_hub(&hub(None, Some(50))).is_ok());
        assert!(pg.with_hub(&hub(None, Some(49))).is_err());
    }

    #[test]
    fn the_tenant_bounds_are_checked_before_anything_starts() {
        let bounds = |open: Option<usize>, idle: Option<u64>, agents: Option<usize>| HubArgs {
            max_open_tenants: open,
            tenant_idle: idle.map(Duration::from_millis),
            max_agents_per_tenant: agents,
            ..HubArgs::default()
        };
        let sqlite = Database::Sqlite(PathBuf::from("/data/shiitake.db"));
        assert_eq!(
            sqlite.with_hub(&bounds(Some(1), None, None)),
            Err(DatabaseError::TimingWithoutLeases)
        );
        let pg = postgres("postgres://h/db");
        let Ok(Database::Postgres(at_edge)) =
            pg.clone().with_hub(&bounds(Some(1), Some(1), Some(1)))
        else {
            panic!("1, 1 ms and 1 are the smallest bounds");
        };
        assert_eq!(
            (
                at_edge.limits().max_open_tenants,
                at_edge.limits().idle,
                at_edge.limits().max_agents_per_tenant
            ),
            (1, Duration::from_millis(1), 1)
        );
        for past in [
            bounds(Some(0), None, None),
            bounds(None, Some(0), None),
            bounds(None, None, Some(0)),
        ] {
            assert!(
                matches!(pg.clone().with_hub(&past), Err(DatabaseError::Limits(_))),
                "{past:?}"
            );
        }
        let Ok(Database::Postgres(defaults)) = pg.with_hub(&HubArgs::default()) else {
            panic!("the defaults");
        };
        assert_eq!(defaults.limits(), HubLimits::default());
    }
}
