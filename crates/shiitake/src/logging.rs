//! Logs on stderr, filtered by `SHIITAKE_LOG` (`docs/cli.md`), in colour only where
//! the rest of the CLI's output would be: a terminal, without `NO_COLOR` or
//! `TERM=dumb` (`CLICOLOR_FORCE` forces it). A log sent to a file or a pipe (a service
//! manager's journal, `2> serve.log`) carries no escape codes.

use anstream::ColorChoice;
use knapsack::mcp::Redactions;

use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::serve::LogFormat;
use crate::traces::{TraceConfig, Traces};

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

/// Whether log lines on stderr get ANSI colour: `anstream`'s choice for it, the one
/// the CLI's own output follows.
fn colour() -> bool {
    wants_colour(anstream::AutoStream::choice(&std::io::stderr()))
}

fn wants_colour(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always | ColorChoice::AlwaysAnsi => true,
        ColorChoice::Never | ColorChoice::Auto => false,
    }
}

/// Sends logs to stderr through the `SHIITAKE_LOG` filter, as text or (`serve
/// --log-format json`) one JSON object a line; the message says why a filter was
/// refused, so the command can stop before doing anything. Every line is written
/// through the returned [`Redactions`], so a secret added to it later (an `--mcp`
/// header value) never reaches the log, whatever the level, the target or the format.
///
/// With `traces` that name an endpoint, spans go to it too (`crate::traces`), through
/// a filter of their own: the log's level does not decide what a trace holds.
pub fn init(
    format: LogFormat,
    traces: Option<&TraceConfig>,
) -> Result<(Redactions, Option<Traces>), String> {
    let redactions = Redactions::new();
    let scrubbing = redactions.clone();
    let writer = move || scrubbing.writer(std::io::stderr());
    let logs = tracing_subscriber::fmt::layer().with_writer(writer);
    let logs = match format {
        LogFormat::Text => logs.with_ansi(colour()).boxed(),
        // The event's own fields at the top level, its span and every span above it
        // (`http` with the request id, `owner` with the Session and the Agent, `run`
        // with its command) under `span` and `spans`: what a log shipper indexes.
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .with_ansi(false)
            .boxed(),
    };
    // Message content is for a trace that opted in, never for the log.
    let content_off = format!("{}=off", shiitake_core::spans::CONTENT_TARGET)
        .parse()
        .map_err(|error| format!("the log filter: {error}"))?;
    let logs = logs.with_filter(filter()?.add_directive(content_off));
    let (exporting, handle) = match traces.map(crate::traces::layer).transpose()?.flatten() {
        Some((layer, handle)) => (Some(layer), Some(handle)),
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(logs)
        .with(exporting)
        .init();
    Ok((redactions, handle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_choice_for_colour_colours_the_log() {
        assert!(wants_colour(ColorChoice::Always));
        assert!(wants_colour(ColorChoice::AlwaysAnsi));
        assert!(!wants_colour(ColorChoice::Never));
        assert!(
            !wants_colour(ColorChoice::Auto),
            "an unresolved choice stays plain"
        );
    }
}
