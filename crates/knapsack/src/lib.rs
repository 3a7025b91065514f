//! Tool connections for Shiitake agents (being built).
