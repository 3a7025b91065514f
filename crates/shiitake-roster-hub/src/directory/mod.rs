//! The directory of a Hub process: every tenant of the database, each opened on
//! first use and closed when idle.
