//! HTTP connections: hyper serves the REST router of `weft-rest` on the connection, with
//! the bytes read during detection replayed first.

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

pub(crate) async fn serve(stream: TcpStream, prefix: BytesMut, context: Arc<ServerContext>) {
    let router = context.rest_router.clone();
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
