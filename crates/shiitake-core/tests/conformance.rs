//! The shared behaviour suite, run against the in-process Agent.

mod harness;

shiitake_conformance::conformance_tests!(harness::Local);
