//! A request body checked before rmcp reads it: rmcp answers a body that is not JSON
//! with `415` and plain text; a JSON-RPC client expects `400` with a parse error, and
//! a body past the bound `413` with an error it can read.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{Method, Request, Response, StatusCode, header};
use futures::StreamExt;
use tower::Service;

use crate::streams::StreamPlaces;

/// `inner` behind the check, for bodies of at most `max_bytes`, each POST holding one
/// of `places` until its response ends.
#[derive(Clone)]
pub(crate) struct Checked<S> {
    inner: S,
    max_bytes: usize,
    places: StreamPlaces,
}

impl<S> Checked<S> {
    pub(crate) fn new(inner: S, max_bytes: usize, places: StreamPlaces) -> Self {
        Self {
            inner,
            max_bytes,
            places,
        }
    }
}

/// A JSON-RPC error response with no request id, with `status`.
fn refusal(status: StatusCode, code: i32, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message},
    });
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

impl<S, B> Service<Request<Body>> for Checked<S>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _context: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let mut inner = self.inner.clone();
        let max_bytes = self.max_bytes;
        let places = self.places.clone();
        Box::pin(async move {
            let mut place = None;
            let request = if request.method() == Method::POST {
                match places.enter() {
                    Ok(entered) => place = Some(entered),
                    Err(error) => {
                        return Ok(refusal(
                            StatusCode::SERVICE_UNAVAILABLE,
                            -32603,
                            &error.message,
                        ));
                    }
                }
                let (parts, body) = request.into_parts();
                let Ok(bytes) = axum::body::to_bytes(body, max_bytes).await else {
                    let message = format!("the request body is longer than {max_bytes} bytes");
                    return Ok(refusal(StatusCode::PAYLOAD_TOO_LARGE, -32600, &message));
                };
                if serde_json::from_slice::<serde::de::IgnoredAny>(&bytes).is_err() {
                    return Ok(refusal(
                        StatusCode::BAD_REQUEST,
                        -32700,
                        "Parse error: the body is not JSON",
                    ));
                }
                Request::from_parts(parts, Body::from(bytes))
            } else {
                request
            };
            let response = inner.call(request).await?;
            Ok(response.map(|body| match place {
                // The place goes back when the last chunk of the response has gone.
                Some(place) => {
                    Body::from_stream(Body::new(body).into_data_stream().map(move |chunk| {
                        let _held = &place;
                        chunk
                    }))
                }
                None => Body::new(body),
            }))
        })
    }
}
