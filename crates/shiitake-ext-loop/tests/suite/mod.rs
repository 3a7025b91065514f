//! One module per capability, named for the behaviour it tests.

mod cron_loop;
mod self_paced;
