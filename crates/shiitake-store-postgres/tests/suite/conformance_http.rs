//! The shared behaviour suite, run against a PostgreSQL-backed Agent behind a real
//! HTTP server on 127.0.0.1, reached with `RemoteAgent`.

use crate::support;

shiitake_conformance::conformance_tests!(support::PgRemote, if support::ready());
