//! Reading the test Agent's SQLite file directly, for what no API shows (timer rows,
//! admitted commands, history collections).

use std::path::Path;
use std::str::FromStr;

use sqlx::ConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;

/// A connection to the SQLite file at `path` (an Agent's, see
/// [`TestAgent::path`](crate::TestAgent::path)), for queries of rows no API shows.
pub async fn connect(path: &Path) -> sqlx::SqliteConnection {
    let options = match SqliteConnectOptions::from_str("sqlite://") {
        Ok(options) => options.filename(path),
        Err(error) => panic!("no SQLite options: {error}"),
    };
    match options.connect().await {
        Ok(connection) => connection,
        Err(error) => panic!("{} did not open: {error}", path.display()),
    }
}

/// How many durable timers the extension `extension_id` has in the file at `path`, so
/// a test sees a timer set or cleared without waiting for it.
pub async fn timers_of(path: &Path, extension_id: &str) -> i64 {
    let count = sqlx::query_scalar("SELECT COUNT(*) FROM timers WHERE extension_id = ?")
        .bind(extension_id)
        .fetch_one(&mut connect(path).await)
        .await;
    match count {
        Ok(count) => count,
        Err(error) => panic!("the timers of `{extension_id}` did not read: {error}"),
    }
}
