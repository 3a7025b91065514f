//! One module per capability, named for the behaviour it tests.

mod describe;
mod execute_deadline;
mod invalidation;
mod name_mapping;
mod schema_subset;
