//! One module per capability, named for the behaviour it tests.

mod capture;
mod commands;
mod local_attachment;
mod patch_gating;
mod routing;
mod seed;
mod selection;
mod skill_then_patch;
