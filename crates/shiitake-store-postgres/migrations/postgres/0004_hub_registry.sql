-- The Hub's registry (src/registry/): its tenants, their Agents, their tokens and the
-- web page's logins, shared by every process on the database.
--
-- Nothing secret is stored in clear. A token, a login code and a browser session are
-- each `<id>.<secret>`: the id is the row's key, and the row keeps only the SHA-256
-- digest of the secret, so a copy of the database (a backup, a replica, a log of
-- its rows) lets nobody in. Times are Unix milliseconds, on the registry's clock
-- (the database's unless a test injects one).

CREATE TABLE hub_tenants (
    name       TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);

-- An Agent name is unique on a Hub: `/v1/agents/{agent}` names one Agent whatever the
-- tenant. `agent_id` in the store's tables is this name.
CREATE TABLE hub_agents (
    name       TEXT PRIMARY KEY,
    tenant     TEXT NOT NULL REFERENCES hub_tenants (name) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    -- Grows with every Agent added, so a tenant's Agents list first one first.
    position   BIGSERIAL NOT NULL
);

CREATE INDEX hub_agents_by_tenant ON hub_agents (tenant, position);

CREATE TABLE hub_tokens (
    id            TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL REFERENCES hub_tenants (name) ON DELETE CASCADE,
    secret_sha256 BYTEA NOT NULL,
    created_at    BIGINT NOT NULL
);

CREATE INDEX hub_tokens_by_tenant ON hub_tokens (tenant, created_at);

-- One-time login codes (links) and the browser sessions they open. `tenant` is the
-- caller the login stands for, NULL for the operator; `caller` is the same as a key
-- ('' for the operator), so the bounds per caller are counted on an index.
CREATE TABLE hub_login_codes (
    id            TEXT PRIMARY KEY,
    secret_sha256 BYTEA NOT NULL,
    tenant        TEXT REFERENCES hub_tenants (name) ON DELETE CASCADE,
    caller        TEXT GENERATED ALWAYS AS (COALESCE(tenant, '')) STORED,
    expires_at    BIGINT NOT NULL
);

CREATE INDEX hub_login_codes_by_caller ON hub_login_codes (caller, expires_at);

CREATE TABLE hub_web_sessions (
    id            TEXT PRIMARY KEY,
    secret_sha256 BYTEA NOT NULL,
    tenant        TEXT REFERENCES hub_tenants (name) ON DELETE CASCADE,
    caller        TEXT GENERATED ALWAYS AS (COALESCE(tenant, '')) STORED,
    expires_at    BIGINT NOT NULL
);

CREATE INDEX hub_web_sessions_by_caller ON hub_web_sessions (caller, expires_at);

-- The Sessions with open work, for the registry's `wanted` (the Agents that must be
-- open somewhere): a partial index, so the question costs the open Sessions only.
CREATE INDEX sessions_with_open_work ON sessions (agent_id) WHERE open_from IS NOT NULL;
