//! One module per capability, named for the behaviour it tests.

mod asking;
mod bounds;
mod crash_between_answer_and_outcome;
mod late_answers;
mod over_http;
mod state_machine;
mod waits_on_sender;
