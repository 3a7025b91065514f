//! Skills: host-supplied, read-only skill discovery for Shiitake Sessions.
//!
//! **What it owns.** The host names read-only skill roots; each root is a directory of
//! skills, a skill being a folder with a `SKILL.md` whose YAML front matter carries
//! `name` and `description` and whose body, with the files beside it, holds the
//! instructions (the layout Claude Code and codex-rs read). [`SkillLibrary::discover`]
//! reads the roots once; every folder that is not a usable skill is kept with the reason
//! ([`contract::Problem`]). Each run gets the metadata as a bounded prompt section in name
//! order, and the `skill.load {name, path?}` tool, which reads through a Knapsack Files
//! port jailed to that skill's folder (128 KiB). `/skills` lists skills and problems.
//!
//! [`extension`] declares all of it on core's extension kit; [`add_skills`] adds it to an
//! Agent with exactly its grants (files, prompt, tools, commands), the library as its
//! file port.
//!
//! **What it does not own.** Choosing roots (the host), state (it keeps none), writing
//! skills, or running their scripts.
//!
//! Without the default `runtime` feature only [`contract`] compiles, with no core
//! dependency: what a client needs to call `/skills` and read its answer.
//!
//! `docs/ext-skills.md` in the repository documents the rules and bounds.

pub mod contract;

#[cfg(feature = "runtime")]
mod extension;
#[cfg(feature = "runtime")]
mod frontmatter;
#[cfg(feature = "runtime")]
mod library;
#[cfg(feature = "runtime")]
mod prompt;
#[cfg(feature = "runtime")]
mod tools;

#[cfg(feature = "runtime")]
pub use extension::{RunLibrary, add_skills, extension};
#[cfg(feature = "runtime")]
pub use library::{SkillLibrary, SkillRoot};
