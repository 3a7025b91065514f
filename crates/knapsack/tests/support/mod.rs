//! What the knapsack tests share: real MCP servers (`mcp`).

pub mod mcp;
