//! One module per capability, named for the behaviour it tests.

mod directory_idle;
mod directory_open;
mod directory_sweep;
mod directory_tenant_view;
mod hub_approvals;
mod hub_on_sqlite;
