//! What a model can handle: the profile a spec gives it, which decides how much of the
//! host's tools and prompt a run offers it.

use serde::{Deserialize, Serialize};

/// How much a model can take in, as its spec says (`?profile=small`).
///
/// The runner reads it from [`Model::profile`](crate::Model::profile): a small model
/// (such as the bundled SmolLM2-135M) reads a long prompt slowly and picks among many
/// tools badly, so it is offered a compact tool set with short descriptions and a
/// short system prompt (`docs/models.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelProfile {
    /// A capable model: every tool the host offers, described in full.
    #[default]
    Full,
    /// A small model: the compact tool set, short descriptions, a short system prompt.
    Small,
}

impl ModelProfile {
    /// The spelling in specs and flags: `full` or `small`.
    pub fn as_str(self) -> &'static str {
        match self {
            ModelProfile::Full => "full",
            ModelProfile::Small => "small",
        }
    }
}

impl std::fmt::Display for ModelProfile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ModelProfile {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "full" => Ok(ModelProfile::Full),
            "small" => Ok(ModelProfile::Small),
            other => Err(format!("profile is `full` or `small`, not `{other}`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_their_own_spelling_only() {
        for profile in [ModelProfile::Full, ModelProfile::Small] {
            assert_eq!(profile.as_str().parse(), Ok(profile));
        }
        assert!("Small".parse::<ModelProfile>().is_err());
        assert!("".parse::<ModelProfile>().is_err());
        assert_eq!(ModelProfile::default(), ModelProfile::Full);
    }
}
