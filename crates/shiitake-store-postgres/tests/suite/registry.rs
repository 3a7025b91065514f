//! The registry of tenants, Agents, tokens and web logins on a real PostgreSQL.
