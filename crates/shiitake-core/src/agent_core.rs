//! The context every owner, runner, timer and extension routine of one Agent shares.
//!
//! It lives apart from the [`Agent`](crate::Agent) facade so the parts that need it do
//! not import the facade, and the facade is the only file that knows them all.

use std::sync::Arc;

use shiitake_capabilities::Catalog;
use tokio_util::sync::CancellationToken;

use crate::config::AgentConfig;
use crate::extension::host::Host;
use crate::owner::registry::Registry;
use crate::store::Store;

/// What every owner and runner of one Agent shares.
pub(crate) struct AgentCore {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) tools: Arc<Catalog>,
    pub(crate) config: Arc<AgentConfig>,
    pub(crate) owners: Registry,
    pub(crate) host: Host,
    /// Cancelled by `close`: the timer scheduler stops.
    pub(crate) closing: CancellationToken,
    /// Leases and forwarding when several processes share the store; `None` when
    /// this process is the store's only user.
    pub(crate) ownership: Option<Arc<dyn crate::store::Ownership>>,
}
