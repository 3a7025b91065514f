//! A running tool's progress (a command's latest output) forwarded to its owner while
//! the call runs: at most one report every [`SPACING`], the latest one (a tool may report
//! as often as it likes; what it said in between is not kept), its text cut to its last
//! [`TOOL_OUTPUT_BYTES`]. The owner shows it in the Session's activity until the call's
//! result is committed; nothing of it is stored.

use std::future::Future;
use std::time::Duration;

use shiitake_capabilities::ProgressNote;
use shiitake_protocol::{TOOL_OUTPUT_BYTES, ToolOutput};
use tokio::sync::watch;

use super::{OwnerLink, RunEvent};

/// The shortest time between two reports of one call.
pub(crate) const SPACING: Duration = Duration::from_millis(100);

/// Runs `call`, forwarding what `notes` receives meanwhile as `tool`'s output.
pub(super) async fn forwarding<T>(
    link: &OwnerLink,
    tool: &str,
    mut notes: watch::Receiver<ProgressNote>,
    call: impl Future<Output = T>,
) -> T {
    tokio::pin!(call);
    let mut open = true;
    let mut next = tokio::time::Instant::now();
    loop {
        tokio::select! {
            biased;
            done = &mut call => return done,
            changed = notes.changed(), if open => {
                if changed.is_err() {
                    open = false;
                    continue;
                }
                // Wait out the spacing (the call may end meanwhile), then send the latest.
                tokio::select! {
                    biased;
                    done = &mut call => return done,
                    () = tokio::time::sleep_until(next) => {}
                }
                let note = notes.borrow_and_update().clone();
                link.tell(RunEvent::ToolOutput(Box::new(output(tool, note)))).await;
                next = tokio::time::Instant::now() + SPACING;
            }
        }
    }
}

/// `note` as the activity carries it: its text cut to its last [`TOOL_OUTPUT_BYTES`],
/// on a character boundary.
fn output(tool: &str, note: ProgressNote) -> ToolOutput {
    let mut start = note.text.len().saturating_sub(TOOL_OUTPUT_BYTES);
    while !note.text.is_char_boundary(start) {
        start += 1;
    }
    ToolOutput {
        tool: tool.to_owned(),
        text: note.text[start..].to_owned(),
        total_bytes: note.total_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_cut_to_its_last_bytes_on_a_character_boundary() {
        let text = format!("é{}", "a".repeat(TOOL_OUTPUT_BYTES - 1));
        let cut = output(
            "commands__exec",
            ProgressNote {
                text: text.clone(),
                total_bytes: 9,
            },
        );
        assert_eq!(cut.text, "a".repeat(TOOL_OUTPUT_BYTES - 1));
        let whole = "a".repeat(TOOL_OUTPUT_BYTES);
        let kept = output(
            "t",
            ProgressNote {
                text: whole.clone(),
                total_bytes: 1,
            },
        );
        assert_eq!(kept.text, whole, "at the bound, nothing is cut");
    }
}
