//! The prompt section a run captures: where Home stands, which other Computers the run can
//! reach, and whether it can patch. Pure text from values.

use crate::contract::{AttachmentName, HomeState, PROMPT_NAMES_LISTED};

/// The names, comma-separated, at most [`PROMPT_NAMES_LISTED`] then a count of the rest.
fn names(list: &[&AttachmentName]) -> String {
    let mut text = list
        .iter()
        .take(PROMPT_NAMES_LISTED)
        .map(|name| name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if list.len() > PROMPT_NAMES_LISTED {
        text.push_str(&format!(" and {} more", list.len() - PROMPT_NAMES_LISTED));
    }
    text
}

/// The section for a run: `state` is Home as the run captured it, `attached` the table's
/// names in the host's order, `patch` whether Home's port has a native patch engine.
pub fn section(state: &HomeState, attached: &[&AttachmentName], patch: bool) -> String {
    match state {
        HomeState::Chosen { name, .. } | HomeState::Adoptable { name, .. } => {
            let others: Vec<&AttachmentName> =
                attached.iter().copied().filter(|n| *n != name).collect();
            let reach = if others.is_empty() {
                "No other Computer is attached.".to_owned()
            } else {
                format!(
                    "computer://<name>/<path> reaches another attached Computer: {}.",
                    names(&others)
                )
            };
            let patching = if patch {
                "apply_patch edits Home only: the paths in a patch are Home paths."
            } else {
                "Home has no patch engine, so there is no apply_patch."
            };
            format!(
                "Home is the Computer `{name}`. The files tools (read, list, glob, grep) work on \
                 Home for bare paths and computer://home/<path>. {reach} {patching}"
            )
        }
        HomeState::Detached { attachment_id } => {
            let choose = if attached.is_empty() {
                "No Computer is attached now.".to_owned()
            } else {
                format!(
                    "A person can choose another with /home <name>; attached: {}.",
                    names(attached)
                )
            };
            format!(
                "Home is the Computer attachment `{attachment_id}`, which is not attached now, \
                 so this run has no file tools. {choose}"
            )
        }
        HomeState::Unchosen { attached: 0 } => {
            "No Computer is attached, so this run has no file tools.".to_owned()
        }
        HomeState::Unchosen { .. } => format!(
            "Several Computers are attached ({}) and none is Home, so this run has no file \
             tools. A person chooses Home with /home <name>.",
            names(attached)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::AttachmentId;

    fn name(text: &str) -> AttachmentName {
        AttachmentName::new(text).unwrap()
    }

    #[test]
    fn each_state_says_what_the_run_can_do() {
        let (a, b) = (name("work"), name("notes"));
        let chosen = HomeState::Chosen {
            attachment_id: AttachmentId::new("1").unwrap(),
            name: a.clone(),
        };
        assert_eq!(
            section(&chosen, &[&a, &b], true),
            "Home is the Computer `work`. The files tools (read, list, glob, grep) work on Home \
             for bare paths and computer://home/<path>. computer://<name>/<path> reaches another \
             attached Computer: notes. apply_patch edits Home only: the paths in a patch are \
             Home paths."
        );
        assert!(
            section(&chosen, &[&a], false)
                .contains("No other Computer is attached. Home has no patch engine")
        );
        let detached = HomeState::Detached {
            attachment_id: AttachmentId::new("gone").unwrap(),
        };
        assert!(section(&detached, &[&b], true).contains("`gone`, which is not attached now"));
        assert!(section(&detached, &[], true).ends_with("No Computer is attached now."));
        assert!(
            section(&HomeState::Unchosen { attached: 2 }, &[&a, &b], true)
                .contains("(work, notes)")
        );
        assert_eq!(
            section(&HomeState::Unchosen { attached: 0 }, &[], true),
            "No Computer is attached, so this run has no file tools."
        );
    }

    #[test]
    fn the_longest_sections_fit_their_bound() {
        let many: Vec<AttachmentName> = (0..100)
            .map(|i| {
                name(&format!(
                    "{i:02}{}",
                    "n".repeat(crate::contract::MAX_NAME_BYTES - 2)
                ))
            })
            .collect();
        let refs: Vec<&AttachmentName> = many.iter().collect();
        let id = AttachmentId::new("i".repeat(crate::contract::MAX_ATTACHMENT_ID_BYTES)).unwrap();
        let states = [
            HomeState::Chosen {
                attachment_id: id.clone(),
                name: many[0].clone(),
            },
            HomeState::Detached { attachment_id: id },
            HomeState::Unchosen { attached: 100 },
        ];
        for state in &states {
            for patch in [true, false] {
                let text = section(state, &refs, patch);
                assert!(
                    text.len() <= crate::contract::PROMPT_SECTION_BYTES,
                    "{}: {state:?}",
                    text.len()
                );
                assert!(text.contains("and 6"), "{text}");
            }
        }
    }

    #[test]
    fn names_are_listed_up_to_their_bound_then_counted() {
        let many: Vec<AttachmentName> = (0..=PROMPT_NAMES_LISTED)
            .map(|i| name(&format!("c{i}")))
            .collect();
        let refs: Vec<&AttachmentName> = many.iter().collect();
        assert!(!names(&refs[..PROMPT_NAMES_LISTED]).contains("more"));
        let text = names(&refs);
        assert!(
            text.ends_with(&format!("c{} and 1 more", PROMPT_NAMES_LISTED - 1)),
            "{text}"
        );
    }
}
