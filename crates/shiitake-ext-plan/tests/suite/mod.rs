//! One module per capability, named for the behaviour it tests.

mod plan_run;
