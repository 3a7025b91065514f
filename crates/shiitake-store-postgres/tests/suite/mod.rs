//! One module per capability, named for the behaviour it tests.

mod agent_locks;
mod conformance;
mod conformance_http;
mod failover;
mod hub_process;
mod inbox;
mod leases;
mod packed_messages;
mod registry;
mod resume_cursor;
mod rolling;
mod store_faults;
mod tenants;
mod timers_across;
mod writer;
