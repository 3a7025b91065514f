//! `shiitake hub tenant …` and `hub token …`: the operator manages a Hub's tenants and
//! their tokens (`/v1/hub/tenants`, `docs/hub.md`). A token's secret is printed once,
//! when it is issued; the Hub keeps only its hash.

use shiitake_protocol::{IssuedToken, TenantList};

use crate::render::style::inert_line;

/// A token just issued, as printed: what it is for, then the secret alone on the last
/// line (`| tail -1` takes it).
pub fn issued(token: &IssuedToken, what: &str) -> String {
    format!(
        "{what} {} (token id {}); its token, shown only now:\n{}\n",
        inert_line(token.tenant.as_str()),
        token.id,
        token.token
    )
}

/// The tenants as lines: a header, then one line per tenant.
pub fn table(list: &TenantList) -> String {
    if list.tenants.is_empty() {
        return "(no tenants)\n".to_owned();
    }
    let header = ["tenant", "created", "agents", "tokens"].map(str::to_owned);
    let rows: Vec<[String; 4]> = list
        .tenants
        .iter()
        .map(|tenant| {
            let agents: Vec<&str> = tenant.agents.iter().map(|agent| agent.as_str()).collect();
            let tokens: Vec<&str> = tenant
                .tokens
                .iter()
                .map(|token| token.id.as_str())
                .collect();
            [
                tenant.name.to_string(),
                super::table::utc(tenant.created_at),
                agents.join(","),
                if tokens.is_empty() {
                    "-".to_owned()
                } else {
                    tokens.join(",")
                },
            ]
        })
        .collect();
    super::table::aligned(&header, &rows)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use shiitake_protocol::{AgentName, TenantEntry, TenantName, TokenEntry, TokenId};

    #[test]
    fn each_tenant_is_one_aligned_line() {
        let list = TenantList {
            tenants: vec![
                TenantEntry {
                    name: TenantName::new("acme").unwrap(),
                    created_at: 1_764_500_000_000,
                    agents: vec![
                        AgentName::new("acme").unwrap(),
                        AgentName::new("helper").unwrap(),
                    ],
                    tokens: vec![TokenEntry {
                        id: TokenId::new("00000000000000aa").unwrap(),
                        created_at: 0,
                    }],
                },
                TenantEntry {
                    name: TenantName::new("globex").unwrap(),
                    created_at: 1_764_500_000_000,
                    agents: vec![AgentName::new("globex").unwrap()],
                    tokens: Vec::new(),
                },
            ],
        };
        assert_eq!(
            table(&list),
            "tenant  created               agents       tokens\n\
             acme    2025-11-30T10:53:20Z  acme,helper  00000000000000aa\n\
             globex  2025-11-30T10:53:20Z  globex       -\n"
        );
        assert_eq!(
            table(&TenantList {
                tenants: Vec::new()
            }),
            "(no tenants)\n"
        );
    }

    #[test]
    fn an_issued_token_ends_the_output_on_its_own_line() {
        let token = IssuedToken {
            tenant: TenantName::new("acme").unwrap(),
            id: TokenId::new("00000000000000aa").unwrap(),
            token: "00000000000000aa.ff".to_owned(),
        };
        let printed = issued(&token, "created tenant");
        assert_eq!(printed.lines().last(), Some("00000000000000aa.ff"));
        assert!(printed.starts_with("created tenant acme (token id 00000000000000aa)"));
    }
}
