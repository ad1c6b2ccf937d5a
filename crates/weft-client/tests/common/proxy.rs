//! A loopback TCP proxy in front of one server, for tests of what a client does when its
//! connections lag or break: it can hold back what the server sends by a delay, cut every
//! connection open now, and refuse new ones.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Chunks in flight from server to client per connection before reading from the server
/// waits.
const QUEUE_CHUNKS_MAX: usize = 1024;

#[derive(Debug, Default)]
struct Control {
    /// How long bytes from the server are held before the client gets them.
    delay: Duration,
    /// New connections are closed at once.
    refuse: bool,
}

/// The proxy; stops when dropped.
pub struct Proxy {
    /// Where clients connect.
    pub addr: SocketAddr,
    control: Arc<Mutex<Control>>,
    cut: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut.send_modify(|generation| *generation += 1);
    }
}

impl Proxy {
    /// A proxy on a free loopback port forwarding to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let control = Arc::new(Mutex::new(Control::default()));
        let (cut, _) = watch::channel(0u64);
        let task = tokio::spawn(accept(listener, target, Arc::clone(&control), cut.clone()));
        Self {
            addr,
            control,
            cut,
            task,
        }
    }

    /// Holds back what servers send by `delay` from now on (bytes already held keep theirs).
    pub fn set_delay(&self, delay: Duration) {
        self.control.lock().delay = delay;
    }

    /// Closes every connection open now.
    pub fn cut(&self) {
        self.cut.send_modify(|generation| *generation += 1);
    }

    /// Closes new connections at once while `refuse` is true.
    pub fn set_refuse(&self, refuse: bool) {
        self.control.lock().refuse = refuse;
    }
}

async fn accept(
    listener: TcpListener,
    target: SocketAddr,
    control: Arc<Mutex<Control>>,
    cut: watch::Sender<u64>,
) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            return;
        };
        if control.lock().refuse {
            drop(client);
            continue;
        }
        let control = Arc::clone(&control);
        let cut = cut.subscribe();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(target).await else {
                return;
            };
            pump(client, server, control, cut).await;
        });
    }
}

/// Copies client → server at once and server → client after the delay, until either side
/// closes or the connection is cut.
async fn pump(
    client: TcpStream,
    server: TcpStream,
    control: Arc<Mutex<Control>>,
    mut cut: watch::Receiver<u64>,
) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let (held, mut due) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE_CHUNKS_MAX);
    let upstream = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match client_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if server_write.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let downstream_read = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    let at = Instant::now() + control.lock().delay;
                    if held.send((at, buf[..n].to_vec())).await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let downstream_write = async {
        while let Some((at, bytes)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if client_write.write_all(&bytes).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = upstream => {}
        () = async { tokio::join!(downstream_read, downstream_write); } => {}
        _ = cut.changed() => {}
    }
}
