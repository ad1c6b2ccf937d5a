//! Client connections: [`Conn`], plaintext or TLS, and [`Rewind`], a stream that first
//! replays bytes already read (during protocol detection), then reads from the socket.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner` with `prefix` in front of its input.
#[derive(Debug)]
pub struct Rewind<S> {
    prefix: BytesMut,
    inner: S,
}

impl<S> Rewind<S> {
    pub(crate) fn new(prefix: BytesMut, inner: S) -> Self {
        Self { prefix, inner }
    }

    /// The stream under the replayed bytes.
    pub(crate) fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// An accepted client connection: plaintext, or a TLS session over it.
#[derive(Debug)]
pub enum Conn {
    /// Plaintext.
    Plain(tokio::net::TcpStream),
    /// TLS (boxed: a session's state is large, and plaintext connections should not carry
    /// its size).
    Tls(Box<crate::tls::TlsStream>),
}

impl Conn {
    /// The local address the client connected to.
    ///
    /// # Errors
    /// As [`tokio::net::TcpStream::local_addr`].
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        match self {
            Self::Plain(stream) => stream.local_addr(),
            Self::Tls(stream) => stream.get_ref().0.inner().local_addr(),
        }
    }

    /// Whether the connection is TLS.
    #[must_use]
    pub fn is_tls(&self) -> bool {
        matches!(self, Self::Tls(_))
    }

    /// The ALPN protocol the TLS handshake chose, if any.
    #[must_use]
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Self::Plain(_) => None,
            Self::Tls(stream) => stream.get_ref().1.alpn_protocol(),
        }
    }

    /// The certificate chain the TLS client presented (verified against the client CA).
    #[must_use]
    pub fn peer_certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        match self {
            Self::Plain(_) => None,
            Self::Tls(stream) => stream.get_ref().1.peer_certificates(),
        }
    }

    /// Writes all of `bytes` and makes sure they leave: a TLS session may hold written bytes
    /// until flushed, a plain socket never does.
    ///
    /// # Errors
    /// If the connection fails.
    pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        match self {
            Self::Plain(stream) => stream.write_all(bytes).await,
            Self::Tls(stream) => {
                stream.write_all(bytes).await?;
                stream.flush().await
            }
        }
    }

    /// Closes a connection the server ends (a shutdown) so that the client reads every
    /// answer sent before: the server's side is shut first (the client reads the end of the
    /// stream after the last answer), and what the client sent meanwhile — requests this
    /// server did not read and so did not run — is read and dropped until the client closes
    /// too, at most [`CLOSE_LINGER`]. Closing a socket with unread input makes the kernel
    /// reset the connection, and a reset can destroy answers the client has not read yet: a
    /// write it then retries would apply twice.
    pub async fn close_gracefully(&mut self) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // Bounded as a whole: a client that reads nothing could hold the shutdown's write.
        let _ = tokio::time::timeout(CLOSE_LINGER, async {
            if self.shutdown().await.is_err() {
                return;
            }
            let mut sink = [0u8; 4096];
            while matches!(self.read(&mut sink).await, Ok(read) if read > 0) {}
        })
        .await;
    }
}

/// The longest a connection the server closes waits for the client to close its side; see
/// [`Conn::close_gracefully`].
pub const CLOSE_LINGER: std::time::Duration = std::time::Duration::from_secs(1);

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(stream) => stream.is_write_vectored(),
            Self::Tls(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Self::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}
