//! One module per capability, named for the behaviour it tests.

mod bounded_goals;
mod goal_to_completion;
mod human_commands;
mod kill_during_goal_turn;
mod pausing;
mod state_machine;
mod state_version;
mod waiting_on_agents;
