//! One live MCP connection: the rmcp client over Streamable HTTP, its tool module,
//! and the `tools/list_changed` listener that marks the module stale.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};
use shiitake_capabilities::{Invalidator, Module, OperationHandler};
use tokio_util::sync::CancellationToken;

use super::call::McpTool;
use super::error::{McpError, classify_initialize, classify_service};
use super::http::McpHttp;
use super::server::{McpServer, SecretHeaders};
use super::tools::build_module;

/// The client side of one connection: it answers rmcp's callbacks.
///
/// A `tools/list_changed` notification marks the module stale and invalidates the
/// source, so the catalog lists the tools again.
#[derive(Debug)]
pub(crate) struct Listener {
    stale: Arc<AtomicBool>,
    invalidator: Arc<Invalidator>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("knapsack", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::SeqCst);
        self.invalidator.invalidate();
    }
}

/// A connected server and the module its last tool listing produced.
pub(crate) struct Connection {
    server: McpServer,
    headers: Arc<SecretHeaders>,
    service: RunningService<RoleClient, Listener>,
    stale: Arc<AtomicBool>,
    module: Module,
}

impl Connection {
    /// Connects (the MCP handshake) and lists the tools, within `timeout`;
    /// cancelling `cancel` gives up with [`McpError::Cancelled`].
    pub(crate) async fn open(
        server: &McpServer,
        http: &McpHttp,
        invalidator: Arc<Invalidator>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<Self, McpError> {
        let headers = Arc::new(server.headers().clone());
        let stale = Arc::new(AtomicBool::new(false));
        let attempt = async {
            let config = StreamableHttpClientTransportConfig::with_uri(server.url().as_str())
                .custom_headers(headers.to_map());
            let transport =
                StreamableHttpClientTransport::with_client(http.client().clone(), config);
            let listener = Listener {
                stale: stale.clone(),
                invalidator,
            };
            let service = listener
                .serve(transport)
                .await
                .map_err(|error| classify_initialize(&error, &headers).into_error(server.name()))?;
            let module = list(server, &headers, &service).await?;
            Ok::<_, McpError>((service, module))
        };
        let (service, module) = within(server.name(), timeout, cancel, attempt).await?;
        Ok(Self {
            server: server.clone(),
            headers,
            service,
            stale,
            module,
        })
    }

    /// Lists the tools again (after `tools/list_changed`), within `timeout`.
    pub(crate) async fn relist(
        &mut self,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<(), McpError> {
        // Cleared first: a notification that arrives during the listing marks it again.
        self.stale.store(false, Ordering::SeqCst);
        let listing = list(&self.server, &self.headers, &self.service);
        self.module = within(self.server.name(), timeout, cancel, listing).await?;
        Ok(())
    }

    /// The server's name.
    pub(crate) fn name(&self) -> &str {
        self.server.name()
    }

    /// The module of the last listing.
    pub(crate) fn module(&self) -> &Module {
        &self.module
    }

    /// Whether the server announced a new tool list since the last listing.
    pub(crate) fn is_stale(&self) -> bool {
        self.stale.load(Ordering::SeqCst)
    }

    /// Whether the connection has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Ends the connection (rmcp closes the transport and its session).
    pub(crate) async fn close(mut self) {
        if let Err(error) = self.service.close().await {
            tracing::debug!(server = %self.server.name(), %error, "MCP connection task failed while closing");
        }
    }
}

/// `tools/list` (every page), as the server's module.
async fn list(
    server: &McpServer,
    headers: &Arc<SecretHeaders>,
    service: &RunningService<RoleClient, Listener>,
) -> Result<Module, McpError> {
    let tools = service
        .peer()
        .list_all_tools()
        .await
        .map_err(|error| classify_service(&error, headers).into_error(server.name()))?;
    let peer = service.peer().clone();
    build_module(server.name(), server.module_path(), &tools, |tool| {
        Arc::new(McpTool {
            server: server.name().to_owned(),
            tool: tool.name.to_string(),
            peer: peer.clone(),
            headers: headers.clone(),
        }) as Arc<dyn OperationHandler>
    })
}

/// Runs `work` under the timeout and the caller's cancellation.
async fn within<T>(
    name: &str,
    timeout: Duration,
    cancel: &CancellationToken,
    work: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(McpError::Cancelled),
        () = tokio::time::sleep(timeout) => Err(McpError::TimedOut {
            name: name.to_owned(),
            after: timeout,
        }),
        result = work => result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn finishing_after(delay: Duration) -> Result<(), McpError> {
        tokio::time::sleep(delay).await;
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn the_timeout_holds_just_inside_its_edge_and_fails_just_past_it() {
        let timeout = Duration::from_secs(10);
        let cancel = CancellationToken::new();
        let inside = finishing_after(timeout - Duration::from_millis(1));
        assert_eq!(within("notes", timeout, &cancel, inside).await, Ok(()));
        let past = finishing_after(timeout + Duration::from_millis(1));
        assert_eq!(
            within("notes", timeout, &cancel, past).await,
            Err(McpError::TimedOut {
                name: "notes".into(),
                after: timeout
            })
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_wins_over_work_and_timeout() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let ready = async { Ok(()) };
        assert_eq!(
            within("notes", Duration::ZERO, &cancel, ready).await,
            Err(McpError::Cancelled)
        );
    }
}
