//! Extractors that refuse a bad request with a [`ShiitakeError`], never axum's plain text.

use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use shiitake_protocol::ShiitakeError;

use crate::error::HttpError;

/// Largest request body accepted, in bytes: a 128 KiB prompt whose JSON escaping doubled it.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// `too_large` when a length bound refused a value, else `invalid` (the protocol decides).
fn decode_failure(what: &str, detail: &str) -> HttpError {
    HttpError(shiitake_protocol::codec::decode_failure(what, detail))
}

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
        serde_json::from_slice(&bytes)
            .map(Body)
            .map_err(|error| decode_failure("the request body", &error.to_string()))
    }
}

/// Path parameters decoded into `T` (validated identifiers).
#[derive(Debug)]
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Params<T> {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(value)| Params(value))
            .map_err(|rejection| decode_failure("the path", &rejection.body_text()))
    }
}

/// The query string decoded into `T`.
#[derive(Debug)]
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for QueryParams<T> {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::try_from_uri(&parts.uri)
            .map(|Query(value)| QueryParams(value))
            .map_err(|rejection| decode_failure("the query", &rejection.body_text()))
    }
}
