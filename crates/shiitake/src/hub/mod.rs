//! `shiitake hub …`: the operator's commands against a Hub (`serve --database
//! postgres://…`), with the operator's bearer token: its processes (`hub nodes`), its
//! tenants (`hub tenant create|list|delete`) and their tokens (`hub token
//! add|rotate|revoke`). `docs/hub.md` says how an operator runs a Hub with them.

mod nodes;
mod table;
mod tenants;

use shiitake_protocol::{IssueToken, TenantName, TokenId};

use crate::error::CliError;
use crate::setup::Context;

/// What `hub` does.
#[derive(Debug, clap::Subcommand)]
pub enum HubCommand {
    /// List the processes serving the Hub: when each started, its heartbeat's age,
    /// whether it drains, the Sessions it holds and the runs in progress in them.
    Nodes,
    /// Create, list or delete tenants.
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// Issue, rotate or revoke a tenant's tokens.
    #[command(subcommand)]
    Token(TokenCommand),
}

/// What `hub tenant` does.
#[derive(Debug, clap::Subcommand)]
pub enum TenantCommand {
    /// Create a tenant with its first Agent (of the same name) and print its first
    /// token, once.
    Create {
        /// 1-64 ASCII letters, digits, `-` or `_`.
        name: String,
    },
    /// List the tenants with their Agents and token ids.
    List,
    /// Delete a tenant: its tokens stop working, its Agents and Sessions are removed.
    Delete {
        /// The tenant.
        name: String,
    },
}

/// What `hub token` does.
#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Issue another token of a tenant beside its others, printed once.
    Add {
        /// The tenant.
        tenant: String,
    },
    /// Issue a new token of a tenant and revoke its others (and end its web logins),
    /// on every process within a second; the new token is printed once.
    Rotate {
        /// The tenant.
        tenant: String,
    },
    /// Revoke one token of a tenant by its id (`hub tenant list` shows the ids).
    Revoke {
        /// The tenant.
        tenant: String,
        /// The token's id: the 16 hexadecimal digits before the dot.
        id: String,
    },
}

fn tenant(name: &str) -> Result<TenantName, CliError> {
    TenantName::new(name).map_err(|error| CliError::Setup(error.to_string()))
}

/// Runs one `hub` command against the server (its bearer token: the operator's).
pub async fn run(context: &Context, command: HubCommand) -> Result<(), CliError> {
    let hub = context.agent()?;
    let out = match command {
        HubCommand::Nodes => nodes::table(&hub.hub_nodes().await?),
        HubCommand::Tenant(TenantCommand::Create { name }) => {
            tenants::issued(&hub.create_tenant(tenant(&name)?).await?, "created tenant")
        }
        HubCommand::Tenant(TenantCommand::List) => tenants::table(&hub.tenants().await?),
        HubCommand::Tenant(TenantCommand::Delete { name }) => {
            let name = tenant(&name)?;
            hub.delete_tenant(&name).await?;
            format!("deleted tenant {name}\n")
        }
        HubCommand::Token(TokenCommand::Add { tenant: name }) => {
            let request = IssueToken {
                revoke_others: false,
            };
            let issued = hub.issue_token(&tenant(&name)?, request).await?;
            tenants::issued(&issued, "another token of")
        }
        HubCommand::Token(TokenCommand::Rotate { tenant: name }) => {
            let request = IssueToken {
                revoke_others: true,
            };
            let issued = hub.issue_token(&tenant(&name)?, request).await?;
            tenants::issued(&issued, "rotated the tokens of")
        }
        HubCommand::Token(TokenCommand::Revoke { tenant: name, id }) => {
            let name = tenant(&name)?;
            let id = TokenId::new(id).map_err(|error| CliError::Setup(error.to_string()))?;
            hub.revoke_token(&name, &id).await?;
            format!("revoked token {id} of {name}\n")
        }
    };
    anstream::print!("{out}");
    Ok(())
}
