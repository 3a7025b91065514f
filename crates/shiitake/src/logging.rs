//! Logs on stderr, filtered by `SHIITAKE_LOG` (`docs/cli.md`).

/// The log filter: `SHIITAKE_LOG` when set (a filter that does not parse is an
/// error, not a silent default), else `warn`.
fn filter() -> Result<tracing_subscriber::EnvFilter, String> {
    match std::env::var("SHIITAKE_LOG") {
        Err(std::env::VarError::NotPresent) => Ok(tracing_subscriber::EnvFilter::new("warn")),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err("SHIITAKE_LOG is not UTF-8 text; set a filter such as `info`".to_owned())
        }
        Ok(text) => tracing_subscriber::EnvFilter::builder()
            .parse(&text)
            .map_err(|error| {
                format!(
                    "SHIITAKE_LOG={text:?} does not parse ({error}); set a filter such as \
                     `info` or `shiitake_core=debug,warn`"
                )
            }),
    }
}

/// Sends logs to stderr through the `SHIITAKE_LOG` filter; the message says why a
/// filter was refused, so the command can stop before doing anything.
pub fn init() -> Result<(), String> {
    tracing_subscriber::fmt()
        .with_env_filter(filter()?)
        .with_writer(std::io::stderr)
        .init();
    Ok(())
}
