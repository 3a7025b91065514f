//! The shared behaviour suite, run against `RemoteAgent` talking to a real server on 127.0.0.1.

use crate::support;

shiitake_conformance::conformance_tests!(support::Remote);
