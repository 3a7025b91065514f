//! A response body that keeps its connection marked busy until it is done, so an
//! event stream (whose handler returned long ago) is never closed to make room.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use http_body::{Frame, SizeHint};

use super::table::Busy;

/// `inner`, holding `busy` until hyper drops it (sent to its end, or the connection closed).
pub(crate) struct BusyBody {
    pub(crate) inner: Body,
    /// Held, never read: dropping it marks the request done.
    pub(crate) _busy: Busy,
}

impl HttpBody for BusyBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
