//! Extractors that refuse a bad request with a [`ShiitakeError`], never axum's plain text.

use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use futures::FutureExt;
use serde::de::DeserializeOwned;
use shiitake_protocol::ShiitakeError;
use shiitake_protocol::codec::decode_bounded;

use crate::error::HttpError;

/// Largest request body accepted, in bytes: a 128 KiB prompt whose JSON escaping doubled it.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// A JSON request body of at most [`MAX_BODY_BYTES`], decoded into `T`.
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = HttpError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|_| {
                HttpError(ShiitakeError::too_large(format!(
                    "the request body is larger than {MAX_BODY_BYTES} bytes"
                )))
            })?;
        // `too_large` when a length bound refused a value, else `invalid` (the protocol decides).
        decode_bounded("the request body", || serde_json::from_slice(&bytes))
            .map(Body)
            .map_err(HttpError)
    }
}

/// Path parameters decoded into `T` (validated identifiers).
#[derive(Debug)]
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Params<T> {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        // Path extraction does no I/O: it completes in its first poll, inside the decode.
        decode_bounded("the path", || {
            match Path::<T>::from_request_parts(parts, state).now_or_never() {
                Some(result) => result.map_err(|rejection| rejection.body_text()),
                None => Err("path extraction did not complete at once".to_owned()),
            }
        })
        .map(|Path(value)| Params(value))
        .map_err(HttpError)
    }
}

/// The query string decoded into `T`.
#[derive(Debug)]
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for QueryParams<T> {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        decode_bounded("the query", || {
            Query::<T>::try_from_uri(&parts.uri).map_err(|rejection| rejection.body_text())
        })
        .map(|Query(value)| QueryParams(value))
        .map_err(HttpError)
    }
}
