//! One module per capability, named for the behaviour it tests.

mod discovery;
mod load_confinement;
mod prompt_section;
