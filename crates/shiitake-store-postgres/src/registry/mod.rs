//! The Hub's registry: tenants, their Agents, their tokens (hashed) and the web
//! page's logins, shared by every process on the database.
