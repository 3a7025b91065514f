//! The shared behaviour suite, run against an in-process Agent on PostgreSQL.

use crate::support;

shiitake_conformance::conformance_tests!(support::PgLocal, if support::ready());
