//! One module per capability, named for the behaviour it tests.

mod compact_entries;
mod group_commit_crash;
mod open_watermark;
mod store_group_commit;
