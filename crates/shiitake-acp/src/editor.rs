//! The editor's end: the connection updates and requests go through, and the Agent's
//! errors as the editor reads them.

use std::rc::Rc;

use agent_client_protocol::{self as acp, AgentSideConnection};
use shiitake_protocol::{ErrorCode, ShiitakeError};

/// The connection to the editor, set once it exists (it is made with the bridge).
pub(crate) type Editor = Rc<std::cell::OnceCell<AgentSideConnection>>;

/// The Agent's error as the editor reads it: not found, invalid input, or internal.
pub(crate) fn to_acp(error: ShiitakeError) -> acp::Error {
    let base = match error.code {
        ErrorCode::NotFound => acp::Error::resource_not_found(None),
        ErrorCode::Invalid | ErrorCode::TooLarge => acp::Error::invalid_params(),
        _ => acp::Error::internal_error(),
    };
    base.data(serde_json::json!({"code": error.code.as_str(), "message": error.message}))
}
