//! The shared extension set (the seed's "botanical" Agent extensions): questions,
//! goals, loops, plans, Almanac schedules and skills, each with exactly its grants.

use std::sync::Arc;

use shiitake_core::AgentBuilder;
use shiitake_ext_question::QuestionConfig;
use shiitake_ext_skills::{SkillLibrary, add_skills};

/// How a host composes the shared set.
#[derive(Clone, Debug, Default)]
pub struct SharedSet {
    /// An Ask raised during work another Agent sent waits on that Agent first (Local);
    /// off, every Ask goes to a person (Hub).
    pub waits_on_sender: bool,
    /// The host's skills; `None` leaves Skills out.
    pub skills: Option<Arc<SkillLibrary>>,
}

/// Why the shared set could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SharedSetError {
    /// An extension refused to be built (its identity or definition).
    #[error("{extension}: {reason}")]
    Extension {
        /// Which one.
        extension: &'static str,
        /// Why.
        reason: String,
    },
}

fn failed(extension: &'static str) -> impl Fn(String) -> SharedSetError {
    move |reason| SharedSetError::Extension { extension, reason }
}

/// Adds the shared set to `builder`, each extension with exactly its grants.
pub fn add_shared_set(
    builder: AgentBuilder,
    set: &SharedSet,
) -> Result<AgentBuilder, SharedSetError> {
    let question = shiitake_ext_question::extension(QuestionConfig {
        waits_on_sender: set.waits_on_sender,
    })
    .map_err(|error| failed("question")(error.to_string()))?;
    let goal = shiitake_ext_goal::extension().map_err(|error| failed("goal")(error.to_string()))?;
    let plan = shiitake_ext_plan::extension().map_err(|error| failed("plan")(error.to_string()))?;
    let looping =
        shiitake_ext_loop::extension().map_err(|error| failed("loop")(error.to_string()))?;
    let almanac =
        shiitake_ext_almanac::extension().map_err(|error| failed("almanac")(error.to_string()))?;
    let mut builder = builder
        .kit_extension(question)
        .kit_extension(goal)
        .kit_extension(plan)
        .kit_extension(looping)
        .kit_extension(almanac);
    if let Some(library) = &set.skills {
        builder = add_skills(builder, library.clone())
            .map_err(|error| failed("skills")(error.to_string()))?;
    }
    Ok(builder)
}
