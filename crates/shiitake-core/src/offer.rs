//! Which tools a run offers its model, chosen by the model's profile.
//!
//! A model of the full profile is offered every tool of the Agent and its extensions;
//! a small one (`?profile=small`, the bundled model) the compact set: the file tools and
//! `question`. Tools that create durable things (`agents.create`, `loop.start`,
//! Almanac's schedules) reach a small model only when the host names them
//! (`shiitake serve --tools files,question,agents.create`). A tool that is not offered
//! is not in the model's tool list and a call of it is answered as an unknown tool.

use shiitake_capabilities::{ModulePath, OperationPath};
use shiitake_model::ModelProfile;

/// A module (`files`, `env.mcp.notes`: every tool in it) or one tool (`agents.create`),
/// as a dotted path.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolSelector(ModulePath);

impl ToolSelector {
    /// Parses a dotted module or tool path.
    pub fn new(text: &str) -> Result<Self, ToolSetError> {
        ModulePath::new(text.trim())
            .map(Self)
            .map_err(|error| ToolSetError::Selector {
                selector: text.trim().to_owned(),
                reason: error.to_string(),
            })
    }

    /// The dotted text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// Whether the tool at `path` is this one or inside this module.
    pub fn selects(&self, path: &OperationPath) -> bool {
        let path = path.to_string();
        let selector = self.as_str();
        path == selector
            || path
                .strip_prefix(selector)
                .is_some_and(|rest| rest.starts_with('.'))
    }
}

impl std::fmt::Display for ToolSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of tools: all of them, or those some selector names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolSet {
    /// Every tool the run has.
    All,
    /// Only the tools these select (none when the list is empty).
    Only(Vec<ToolSelector>),
}

/// The selectors of [`ToolSet::compact`]: the file tools and asking a person.
const COMPACT: [&str; 2] = ["files", "question"];

impl ToolSet {
    /// The compact set of small models: the file tools (Home's `files.*`) and
    /// `question.*`; nothing that creates an Agent, a loop or a schedule.
    pub fn compact() -> Self {
        Self::Only(
            COMPACT
                .iter()
                .filter_map(|selector| ToolSelector::new(selector).ok())
                .collect(),
        )
    }

    /// Reads `all`, `none`, `compact`, or a comma-separated list of module and tool
    /// paths (`files,question,agents.create`); `compact` may be one of the list's items.
    pub fn parse(text: &str) -> Result<Self, ToolSetError> {
        match text.trim() {
            "" => return Err(ToolSetError::Empty),
            "all" => return Ok(Self::All),
            "none" => return Ok(Self::Only(Vec::new())),
            _ => {}
        }
        let mut selectors = Vec::new();
        for item in text.split(',').map(str::trim) {
            match item {
                "" => return Err(ToolSetError::Empty),
                "all" | "none" => return Err(ToolSetError::Alone(item.to_owned())),
                "compact" => {
                    if let Self::Only(compact) = Self::compact() {
                        selectors.extend(compact);
                    }
                }
                selector => selectors.push(ToolSelector::new(selector)?),
            }
        }
        selectors.sort();
        selectors.dedup();
        Ok(Self::Only(selectors))
    }

    /// Whether the tool at `path` is in the set.
    pub fn offers(&self, path: &OperationPath) -> bool {
        match self {
            Self::All => true,
            Self::Only(selectors) => selectors.iter().any(|selector| selector.selects(path)),
        }
    }
}

impl std::fmt::Display for ToolSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => f.write_str("all"),
            Self::Only(selectors) if selectors.is_empty() => f.write_str("none"),
            Self::Only(selectors) => {
                let names: Vec<&str> = selectors.iter().map(ToolSelector::as_str).collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

/// A tool list that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolSetError {
    /// Nothing, or an empty item between commas.
    #[error(
        "name tools as a comma-separated list of module or tool paths (files,question,agents.create), or all, none or compact"
    )]
    Empty,
    /// `all` or `none` inside a list.
    #[error("`{0}` stands alone, not in a list")]
    Alone(String),
    /// An item that is not a dotted path.
    #[error("`{selector}` is not a module or tool path: {reason}")]
    Selector {
        /// The item as written.
        selector: String,
        /// Why.
        reason: String,
    },
}

/// Which tools runs offer, by the profile of their model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OfferedTools {
    /// For models of the full profile: [`ToolSet::All`] by default.
    pub full: ToolSet,
    /// For small models: [`ToolSet::compact`] by default.
    pub small: ToolSet,
}

impl Default for OfferedTools {
    fn default() -> Self {
        Self {
            full: ToolSet::All,
            small: ToolSet::compact(),
        }
    }
}

impl OfferedTools {
    /// The same set for every profile (`shiitake serve --tools …`).
    pub fn every_profile(set: ToolSet) -> Self {
        Self {
            full: set.clone(),
            small: set,
        }
    }

    /// The set a model of `profile` is offered.
    pub fn for_profile(&self, profile: ModelProfile) -> &ToolSet {
        match profile {
            ModelProfile::Full => &self.full,
            ModelProfile::Small => &self.small,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> OperationPath {
        OperationPath::parse(text).unwrap_or_else(|error| panic!("{text}: {error}"))
    }

    #[test]
    fn the_compact_set_has_the_file_tools_and_question_only() {
        let compact = ToolSet::compact();
        for offered in ["files.read", "files.apply_patch", "question.ask"] {
            assert!(compact.offers(&path(offered)), "{offered}");
        }
        for durable in [
            "agents.create",
            "agents.send",
            "loop.start",
            "almanac.schedule",
            "goal.create",
            "plan.update_plan",
            "ui.execute",
            "env.mcp.notes.create_note",
            // A module whose name only starts like one in the set.
            "filesystem.read",
        ] {
            assert!(!compact.offers(&path(durable)), "{durable}");
        }
        assert_eq!(compact.to_string(), "files,question");
    }

    #[test]
    fn a_list_names_modules_or_single_tools() {
        let set = ToolSet::parse(" files , agents.create,compact").unwrap_or(ToolSet::All);
        assert_eq!(set.to_string(), "agents.create,files,question");
        assert!(set.offers(&path("agents.create")));
        assert!(!set.offers(&path("agents.send")));
        assert!(set.offers(&path("files.grep")));
        assert_eq!(ToolSet::parse("all"), Ok(ToolSet::All));
        assert_eq!(ToolSet::parse("none"), Ok(ToolSet::Only(Vec::new())));
        assert!(
            !ToolSet::parse("none")
                .unwrap_or(ToolSet::All)
                .offers(&path("files.read"))
        );
        assert!(ToolSet::All.offers(&path("agents.create")));
    }

    #[test]
    fn bad_lists_are_refused_with_the_reason() {
        assert_eq!(ToolSet::parse(""), Err(ToolSetError::Empty));
        assert_eq!(ToolSet::parse("files,,question"), Err(ToolSetError::Empty));
        assert_eq!(
            ToolSet::parse("files,all"),
            Err(ToolSetError::Alone("all".into()))
        );
        assert!(matches!(
            ToolSet::parse("files,agents create"),
            Err(ToolSetError::Selector { selector, .. }) if selector == "agents create"
        ));
        assert!(matches!(
            ToolSet::parse("Files"),
            Err(ToolSetError::Selector { .. })
        ));
    }

    #[test]
    fn each_profile_gets_its_own_set_unless_the_host_names_one() {
        let default = OfferedTools::default();
        assert_eq!(default.for_profile(ModelProfile::Full), &ToolSet::All);
        assert_eq!(
            default.for_profile(ModelProfile::Small),
            &ToolSet::compact()
        );
        let named = OfferedTools::every_profile(ToolSet::parse("files").unwrap_or(ToolSet::All));
        assert_eq!(
            named.for_profile(ModelProfile::Full),
            named.for_profile(ModelProfile::Small)
        );
    }
}
