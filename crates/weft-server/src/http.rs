//! HTTP connections: hyper serves the REST router of `weft-rest` on the connection, with
//! the bytes read during detection replayed first.
//!
//! Every request gets the client's address as a [`weft_rest::ClientAddress`] extension
//! (the router refuses lifecycle actions to clients elsewhere than loopback without the
//! password), and its body a deadline: the body must arrive within `request-timeout-secs` of
//! the end of the head, plus the time `request-min-bytes-per-second` allows for what it
//! sends, or the request is answered `408` and the connection closed. Heads have hyper's
//! own timeout, and a connection that sends no whole head within its first-request deadline
//! is closed.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::stream::Conn;
use axum::http::{Request, Response, StatusCode, header};
use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::time::{Instant, Sleep};

use crate::ServerContext;
use crate::deadline::{Allowance, RequestDeadline};
use crate::stream::Rewind;

/// Largest request head (request line and headers) accepted; larger ones get
/// `431 Request Header Fields Too Large` instead of being buffered.
pub const HTTP_HEAD_BYTES_MAX: usize = 64 * 1024;

/// What a request whose body missed its deadline is answered.
const BODY_TIMED_OUT: &str = "request body not received within request-timeout-secs";

pub(crate) async fn serve(
    stream: Conn,
    prefix: BytesMut,
    peer: std::net::SocketAddr,
    context: Arc<ServerContext>,
    deadline: &RequestDeadline,
) {
    let settings = &context.settings;
    let body_deadline = BodyDeadline {
        timeout: Duration::from_secs(settings.request_timeout_secs),
        allowance: Allowance::new(settings.request_min_bytes_per_second),
    };
    // Set once hyper has read a whole head: the first-request deadline is then met.
    let head_received = Arc::new(AtomicBool::new(false));
    let router = context.rest_router.clone();
    let telemetry = Arc::clone(&context.telemetry);
    let received = Arc::clone(&head_received);
    let certificate = context
        .security
        .certificate_user(stream.peer_certificates());
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        received.store(true, Ordering::Relaxed);
        serve_request(
            router.clone(),
            Arc::clone(&telemetry),
            request,
            peer,
            certificate.clone(),
            body_deadline,
        )
    });
    let io = TokioIo::new(Rewind::new(prefix, stream));
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        // From the first byte of a head, or on a kept-alive connection from the previous
        // response: a client that sends a partial head, or idles between requests, is
        // closed after this.
        .header_read_timeout(Duration::from_secs(settings.request_timeout_secs))
        .keep_alive(true)
        .max_buf_size(HTTP_HEAD_BYTES_MAX)
        .serve_connection(io, service);
    let mut connection = std::pin::pin!(connection);
    let mut shutdown = context.shutdown_signal();
    let first_request = async {
        deadline.expired().await;
        if head_received.load(Ordering::Relaxed) {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, "HTTP connection ended with an error");
            }
        }
        () = first_request => {
            tracing::debug!(%peer, "closing HTTP connection: no request within first-request-timeout-secs");
        }
        () = crate::stopped(&mut shutdown) => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// The operation label of an HTTP request in the latency metrics: its method (any other
/// than the standard ones is `OTHER`, so that clients cannot make up label values).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::PATCH => "PATCH",
        _ => "OTHER",
    }
}

/// Runs one request through the router, with the client's address and its body's deadline;
/// a body that missed it is answered `408` and the connection closes (what is left of the
/// body cannot be told from the next request).
async fn serve_request(
    router: axum::Router,
    telemetry: Arc<crate::telemetry::Telemetry>,
    request: Request<Incoming>,
    peer: std::net::SocketAddr,
    certificate: Option<String>,
    body_deadline: BodyDeadline,
) -> Result<Response<axum::body::Body>, std::convert::Infallible> {
    use tower::ServiceExt;
    let started = std::time::Instant::now();
    let operation = method_label(request.method());
    let timed_out = Arc::new(AtomicBool::new(false));
    let mut request = request.map(|body| DeadlineBody {
        inner: body,
        deadline: Instant::now() + body_deadline.timeout,
        allowance: body_deadline.allowance,
        sleep: None,
        timed_out: Arc::clone(&timed_out),
    });
    request
        .extensions_mut()
        .insert(weft_rest::ClientAddress(peer));
    if let Some(user) = certificate {
        request
            .extensions_mut()
            .insert(weft_rest::ClientCertificate(user));
    }
    let response = match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    telemetry.observe(
        crate::telemetry::Protocol::Http,
        operation,
        started.elapsed(),
    );
    if !timed_out.load(Ordering::Relaxed) {
        return Ok(response);
    }
    tracing::debug!(%peer, "closing HTTP connection: request body not received within its deadline");
    let mut response = Response::new(axum::body::Body::from(BODY_TIMED_OUT));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    Ok(response)
}

/// How long request bodies may take.
#[derive(Debug, Clone, Copy)]
struct BodyDeadline {
    timeout: Duration,
    allowance: Allowance,
}

/// The body missed its deadline.
#[derive(Debug, thiserror::Error)]
#[error("{BODY_TIMED_OUT}")]
struct BodyTimedOut;

/// A request body that fails once its deadline passes: `deadline` counts from the end of
/// the head, and each data frame received moves it by what its bytes earn.
struct DeadlineBody {
    inner: Incoming,
    deadline: Instant,
    allowance: Allowance,
    /// Armed only once the body has to be waited for, so that bodies already received (or
    /// empty) cost no timer.
    sleep: Option<Pin<Box<Sleep>>>,
    /// Tells [`serve_request`] to answer 408, whatever the route made of the error.
    timed_out: Arc<AtomicBool>,
}

impl Body for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        // Every field is Unpin (the sleep is boxed), so the body may be used unpinned.
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let earned = this.allowance.earned(data.len());
                    this.deadline = this.deadline.checked_add(earned).unwrap_or(this.deadline);
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        let deadline = this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if sleep.deadline() != deadline {
            sleep.as_mut().reset(deadline);
        }
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.timed_out.store(true, Ordering::Relaxed);
                Poll::Ready(Some(Err(Box::new(BodyTimedOut))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
