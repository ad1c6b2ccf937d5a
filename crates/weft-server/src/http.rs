//! HTTP connections: hyper serves the REST router of `weft-rest` on the connection, with
//! the bytes read during detection replayed first. Every request gets the client's address
//! as a [`weft_rest::ClientAddress`] extension: the router refuses lifecycle actions to
//! clients elsewhere than loopback without the password.

use std::sync::Arc;

use bytes::BytesMut;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpStream;

use crate::ServerContext;
use crate::stream::Rewind;

/// Largest request head (request line and headers) accepted; larger ones get
/// `431 Request Header Fields Too Large` instead of being buffered.
pub const HTTP_HEAD_BYTES_MAX: usize = 64 * 1024;
/// How long a request head (request line and headers) may take to arrive, counted from
/// the first byte of a request or, on a kept-alive connection, from the previous response:
/// a client that sends a partial head, or idles between requests, is closed after this,
/// (a connection that sends nothing at all is closed by protocol detection, after longer).
pub const HTTP_HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

pub(crate) async fn serve(
    stream: TcpStream,
    prefix: BytesMut,
    peer: std::net::SocketAddr,
    context: Arc<ServerContext>,
) {
    use tower::ServiceExt;
    let router = context.rest_router.clone().map_request(
        move |mut request: axum::http::Request<hyper::body::Incoming>| {
            request
                .extensions_mut()
                .insert(weft_rest::ClientAddress(peer));
            request
        },
    );
    let io = TokioIo::new(Rewind::new(prefix, stream));
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HTTP_HEAD_TIMEOUT)
        .keep_alive(true)
        .max_buf_size(HTTP_HEAD_BYTES_MAX)
        .serve_connection(io, TowerToHyperService::new(router));
    let mut connection = std::pin::pin!(connection);
    let mut shutdown = context.shutdown_signal();
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "HTTP connection ended with an error");
            }
        }
        () = crate::stopped(&mut shutdown) => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// Runs an HTTP request another node forwarded here (see `weft_rest::Forwarder`) through
/// this node's REST routes and returns its response.
pub fn execute_forwarded(
    context: &Arc<ServerContext>,
    args: Vec<Vec<u8>>,
) -> weft_core::persistence::BoxFuture<weft_cluster::wire::Response> {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    use weft_cluster::wire::{HttpReply, Response};
    let router = context.rest_router.clone();
    Box::pin(async move {
        let mut args = args.into_iter();
        let (Some(method), Some(uri), Some(body)) = (args.next(), args.next(), args.next()) else {
            return Response::Error("malformed forwarded HTTP request".to_owned());
        };
        let mut request = axum::http::Request::new(axum::body::Body::from(body));
        // Marks the request as forwarded by a node, so that the router runs it here: only
        // this function, serving the cluster port, sets it; a client cannot.
        request.extensions_mut().insert(weft_rest::ForwardedByNode);
        match (
            axum::http::Method::from_bytes(&method),
            axum::http::Uri::try_from(uri),
        ) {
            (Ok(method), Ok(uri)) => {
                *request.method_mut() = method;
                *request.uri_mut() = uri;
            }
            _ => return Response::Error("malformed forwarded HTTP request".to_owned()),
        }
        while let (Some(name), Some(value)) = (args.next(), args.next()) {
            if let (Ok(name), Ok(value)) = (
                axum::http::HeaderName::from_bytes(&name),
                axum::http::HeaderValue::from_bytes(&value),
            ) {
                request.headers_mut().append(name, value);
            }
        }
        let response = match router.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let (parts, body) = response.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes().to_vec(),
            Err(error) => return Response::Error(error.to_string()),
        };
        let reply = HttpReply {
            status: parts.status.as_u16(),
            headers: parts
                .headers
                .iter()
                .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
                .collect(),
            body,
        };
        Response::Reply(reply.encode())
    })
}
