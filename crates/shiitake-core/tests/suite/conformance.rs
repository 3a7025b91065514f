//! The shared behaviour suite, run against the in-process Agent.

use crate::support::harness;

shiitake_conformance::conformance_tests!(harness::Local);
