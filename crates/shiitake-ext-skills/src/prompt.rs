//! The prompt section: skill metadata in name order, within [`PROMPT_SECTION_BYTES`].

use crate::contract::{PROMPT_SECTION_BYTES, SkillSummary};
use crate::frontmatter::prompt_description;

const HEADER: &str = "Skills: folders of instructions for particular tasks. When a skill's \
description fits the task, call skill.load with its name to read its instructions, then \
with a path to read a file beside them. Available skills:";

/// The line that ends a section that could not hold every skill.
fn more_line(count: usize) -> String {
    format!("\n({count} more skills are not listed here for space.)")
}

/// The longest "more" line the section may need: reserved so it always fits.
fn reserve(total: usize) -> usize {
    more_line(total).len()
}

/// The section for `skills` (already in name order): the header, then one line per skill
/// (`- name: description`, each description cut to its prompt bound) while they fit,
/// then how many were left out. `None` when there is no skill.
pub(crate) fn section<'a>(
    skills: impl ExactSizeIterator<Item = &'a SkillSummary>,
) -> Option<String> {
    let total = skills.len();
    if total == 0 {
        return None;
    }
    let mut text = HEADER.to_owned();
    let mut listed = 0;
    for skill in skills {
        let line = format!(
            "\n- {}: {}",
            skill.name,
            prompt_description(&skill.description)
        );
        let left_after = total - listed - 1;
        let room_needed = if left_after == 0 { 0 } else { reserve(total) };
        if text.len() + line.len() + room_needed > PROMPT_SECTION_BYTES {
            break;
        }
        text.push_str(&line);
        listed += 1;
    }
    if listed < total {
        text.push_str(&more_line(total - listed));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::PROMPT_DESCRIPTION_BYTES;
    use proptest::prelude::*;

    fn skill(name: &str, description: &str) -> SkillSummary {
        SkillSummary {
            name: name.into(),
            description: description.into(),
            root: "r".into(),
            folder: name.into(),
        }
    }

    #[test]
    fn no_skill_no_section() {
        assert_eq!(section(std::iter::empty()), None);
    }

    #[test]
    fn skills_are_listed_in_the_given_order_with_their_descriptions() {
        let skills = [skill("a", "First."), skill("b", "Second.")];
        let text = section(skills.iter()).unwrap();
        assert_eq!(text, format!("{HEADER}\n- a: First.\n- b: Second."));
    }

    /// Skills whose lines fill the section to exactly `bytes` after the header.
    fn filling(bytes: usize) -> Vec<SkillSummary> {
        let full = "d".repeat(PROMPT_DESCRIPTION_BYTES);
        let full_line = "\n- ab: ".len() + full.len();
        let mut count = bytes / full_line;
        let mut last = bytes - count * full_line;
        if last < "\n- a: d".len() {
            count -= 1;
            last += full_line;
        }
        let mut skills: Vec<_> = (0..count).map(|_| skill("ab", &full)).collect();
        let description = PROMPT_DESCRIPTION_BYTES.min(last - "\n- a: ".len());
        let name = last - "\n- : ".len() - description;
        skills.push(skill(&"z".repeat(name), &"d".repeat(description)));
        skills
    }

    #[test]
    fn a_section_of_exactly_its_bound_is_whole_and_one_byte_more_is_not() {
        let exact = filling(PROMPT_SECTION_BYTES - HEADER.len());
        let text = section(exact.iter()).unwrap();
        assert_eq!(text.len(), PROMPT_SECTION_BYTES);
        assert!(!text.contains("more skills"));

        let over = filling(PROMPT_SECTION_BYTES - HEADER.len() + 1);
        let text = section(over.iter()).unwrap();
        assert!(text.len() <= PROMPT_SECTION_BYTES, "{}", text.len());
        let listed = text.matches("\n- ").count();
        assert!(listed < over.len());
        assert!(text.ends_with(&more_line(over.len() - listed)), "{text}");
    }

    #[test]
    fn many_skills_list_a_prefix_and_count_the_rest() {
        let description = "d".repeat(PROMPT_DESCRIPTION_BYTES);
        let names: Vec<String> = (0..40).map(|i| format!("s{i:02}")).collect();
        let skills: Vec<_> = names.iter().map(|n| skill(n, &description)).collect();
        let text = section(skills.iter()).unwrap();
        assert!(text.len() <= PROMPT_SECTION_BYTES, "{}", text.len());
        let listed = text.matches("\n- s").count();
        assert!(listed > 0 && listed < 40);
        assert!(text.ends_with(&more_line(40 - listed)), "{text}");
        for name in names.iter().take(listed) {
            assert!(text.contains(&format!("\n- {name}:")), "{name}");
        }
    }

    proptest! {
        // Generating long Unicode descriptions dominates; 64 cases keep this under seconds.
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the skills, the section stays within its bound, lists a prefix of them
        /// in order, and says how many it left out.
        #[test]
        fn the_section_is_bounded_and_accounts_for_every_skill(
            skills in proptest::collection::vec(("[a-z]{1,64}", "\\PC{1,300}"), 1..60)
        ) {
            let skills: Vec<_> = skills.iter().map(|(n, d)| skill(n, d)).collect();
            let text = section(skills.iter()).unwrap();
            prop_assert!(text.len() <= PROMPT_SECTION_BYTES);
            let mut listed = 0;
            let mut rest = &text[HEADER.len()..];
            for s in &skills {
                let line = format!("\n- {}: {}", s.name, prompt_description(&s.description));
                match rest.strip_prefix(line.as_str()) {
                    Some(after) => { rest = after; listed += 1; }
                    None => break,
                }
            }
            if listed < skills.len() {
                prop_assert_eq!(rest, more_line(skills.len() - listed));
            } else {
                prop_assert_eq!(rest, "");
            }
        }
    }
}
