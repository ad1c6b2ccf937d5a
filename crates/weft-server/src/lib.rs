//! `weft-server` is the `weft` binary's library: it reads the configuration, builds the
//! cache manager, listens on one port and serves every protocol there, detected from each
//! connection's first bytes (see [`detect`]), in plaintext or TLS (see [`tls`]). Hot Rod connections go to [`hotrod`], RESP ones
//! to [`resp`], memcached ones (text and binary, also on the optional `memcached-listen`
//! port) to [`memcached`], HTTP ones to the REST router of `weft-rest`.
//!
//! It owns sockets, tasks, shutdown and the per-connection protocol adapters. It must not
//! reach into the data container: every command goes through `weft_core::Cache`.

mod admission;
pub(crate) mod authorization;
mod buffers;
pub mod cli;
pub mod cluster;
pub mod config;
mod deadline;
pub mod detect;
pub mod hotrod;
mod http;
pub mod lifecycle;
pub mod logging;
pub mod memcached;
pub mod resp;
pub mod security;
pub mod store_cli;
pub mod stream;
mod telemetry;
pub mod tls;
pub mod users_cli;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use weft_core::CacheManager;

use crate::config::{ServerConfig, ServerSection};
use crate::detect::Protocol;
use crate::stream::Conn;

/// Server-wide state shared by every connection.
#[derive(Debug)]
pub struct ServerContext {
    /// The caches.
    pub manager: CacheManager,
    /// Endpoint settings.
    pub settings: ServerSection,
    /// When the server started.
    pub started: Instant,
    /// The address actually bound.
    pub local_addr: SocketAddr,
    next_client_id: AtomicU64,
    /// Connections open now.
    pub connected_clients: AtomicUsize,
    /// Connections open now per client address.
    pub(crate) admission: admission::Admission,
    /// Connections accepted since start.
    pub total_connections: AtomicU64,
    /// Commands processed since start (all protocols).
    pub total_commands: AtomicU64,
    /// Turns true when the open connections must finish what they run and close: the last
    /// step of a stop, once the node has drained.
    shutdown: watch::Sender<bool>,
    /// Stop requests, the drain and readiness.
    pub lifecycle: Arc<lifecycle::Lifecycle>,
    /// The REST and metrics routes, built once and shared by HTTP connections.
    pub(crate) rest_router: axum::Router,
    /// Hot Rod iterations and client listeners.
    pub(crate) hotrod: hotrod::HotRodState,
    /// RESP clients blocked on list keys (BLPOP and friends).
    pub(crate) list_waiters: resp::commands::lists::Waiters,
    /// EXEC holds it exclusively while it runs a transaction; every other RESP command holds
    /// it shared, so no RESP command runs in the middle of a transaction.
    pub(crate) transaction_gate: parking_lot::RwLock<()>,
    /// RESP pushes: open connections' mailboxes, pub/sub subscriptions, tracked keys.
    pub(crate) push: resp::push::PushHub,
    /// The memcached endpoint's counters and pending `flush_all`.
    pub(crate) memcached: memcached::MemcachedState,
    /// The address of the dedicated memcached listener, if `memcached-listen` is set.
    pub memcached_addr: Option<SocketAddr>,
    /// This node's cluster role, when clustered.
    pub cluster: Option<Arc<cluster::node::Node>>,
    /// Requests run at another member than the one they came to, per protocol.
    pub routed: Arc<cluster::Routed>,
    /// TLS on the client ports, when `[server.tls]` is set.
    pub tls: Option<Arc<tls::Tls>>,
    /// Redis' configuration parameters as CONFIG GET and SET see them.
    pub(crate) redis_config: resp::commands::config::RedisConfig,
    /// RESP commands slower than `slowlog-log-slower-than`.
    pub(crate) slowlog: resp::commands::slowlog::SlowLog,
    /// RESP commands slower than `latency-monitor-threshold` (LATENCY).
    pub(crate) latency: resp::commands::latency::LatencyMonitor,
    /// The Lua interpreter EVAL and FCALL run scripts in, and the running script's state.
    pub(crate) scripting: resp::commands::scripting::Scripting,
    /// How clients authenticate.
    pub security: Arc<security::Security>,
    /// Redis ACL users (RESP's `default` and those ACL SETUSER made) and the ACL log.
    pub(crate) acl: resp::acl::Acl,
    /// Where the RESP databases SWAPDB exchanged are kept (servers with a file store).
    pub(crate) resp_swaps_file: Option<std::path::PathBuf>,
    /// CLIENT PAUSE.
    pub(crate) pause: resp::clients::Pause,
    /// INFO commandstats and errorstats.
    pub(crate) command_stats: resp::commands::stats::CommandStats,
    /// `notify-keyspace-events`.
    pub(crate) keyspace_events: resp::commands::notify::KeyspaceEvents,
    /// Connections and request latencies for `/metrics`.
    pub(crate) telemetry: Arc<telemetry::Telemetry>,
}

/// Runs `f`, which may block for long (a script, a wait for one), without starving the
/// async runtime: on a multi-threaded runtime's worker, the worker's other tasks and the I/O
/// driver go to another thread meanwhile (`block_in_place`); elsewhere `f` just runs.
pub(crate) fn off_worker<R>(f: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl ServerContext {
    /// Resets what CONFIG RESETSTAT resets: the commands and connections counted, and every
    /// cache's statistics (hits, misses, stores…).
    pub(crate) fn reset_statistics(&self) {
        self.total_commands.store(0, Ordering::Relaxed);
        self.total_connections.store(0, Ordering::Relaxed);
        self.command_stats.reset();
        for cache in self.manager.caches() {
            cache.reset_statistics();
        }
    }

    /// Asks the server to shut down (as SIGTERM does): it drains, then closes.
    pub fn request_shutdown(&self) {
        self.lifecycle.request_stop();
    }

    /// A fresh client id (Redis' CLIENT ID: unique, increasing).
    pub fn next_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A receiver that turns true when the server shuts down.
    #[must_use]
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Creates cache `name` with `config` for a client's administration request: on every
    /// node, through the cluster's consensus, when this server is clustered and `config` is
    /// a clustered cache's; on this server otherwise (a local cache of a clustered server is
    /// this node's alone). Returns false, creating nothing, when a cache by that name exists
    /// here or the cluster defines one.
    ///
    /// # Errors
    /// [`CacheAdminError::Manager`] when the cache manager refuses the cache (an invalid
    /// name, a RESP database taken, stores that do not open); [`CacheAdminError::Cluster`]
    /// when the cluster refused or could not agree on it.
    pub async fn define_cache(
        &self,
        name: &str,
        config: weft_core::CacheConfig,
    ) -> Result<bool, CacheAdminError> {
        if self.manager.cache(name).is_some() {
            return Ok(false);
        }
        match &self.cluster {
            Some(node) if config.mode.is_clustered() => node
                .create_cache(name, &config)
                .await
                .map_err(|error| CacheAdminError::Cluster(format!("{error:#}"))),
            _ => match self.manager.create_cache(name, config) {
                Ok(_) => Ok(true),
                Err(weft_core::ManagerError::AlreadyExists(_)) => Ok(false),
                Err(error) => Err(error.into()),
            },
        }
    }

    /// Removes cache `name` for a client's administration request: from every node when
    /// this server is clustered (unless it is a local cache, this node's alone), from this
    /// server otherwise. Returns false when there was no such cache.
    ///
    /// # Errors
    /// [`CacheAdminError::Cluster`] when the cluster could not agree on the removal.
    pub async fn remove_cache(&self, name: &str) -> Result<bool, CacheAdminError> {
        let local = self
            .manager
            .cache(name)
            .is_some_and(|cache| !cache.config().mode.is_clustered());
        match &self.cluster {
            Some(node) if !local => node
                .remove_cache(name)
                .await
                .map_err(|error| CacheAdminError::Cluster(format!("{error:#}"))),
            _ => Ok(self.manager.remove_cache(name)),
        }
    }
}

/// Why a client's request to create or remove a cache failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheAdminError {
    /// The cache manager refused the cache.
    #[error(transparent)]
    Manager(#[from] weft_core::ManagerError),
    /// The cluster refused the change or could not agree on it, or this node did not apply
    /// it in time.
    #[error("{0}")]
    Cluster(String),
}

/// Waits until the writes a connection made to caches with stores are durable, so that the
/// replies acknowledging them may be sent. On failure the connection must close without
/// replying: the client must not take a write the store may have lost as done.
pub(crate) async fn settle(unsettled: &mut weft_core::Durability, peer: SocketAddr) -> bool {
    if unsettled.is_empty() {
        return true;
    }
    match std::mem::take(unsettled).wait().await {
        Ok(()) => true,
        Err(error) => {
            tracing::error!(%peer, %error, "closing the connection without acknowledging writes the store did not make durable");
            false
        }
    }
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    context: Arc<ServerContext>,
    accept_task: tokio::task::JoinHandle<()>,
    cluster: Option<cluster::Cluster>,
    /// The data directory's lock, when a cache declares a file store: held until the
    /// stores are stopped.
    data_dir_lock: Option<weft_store::lock::DirLock>,
}

impl Server {
    /// Binds the listener and starts accepting connections on the current runtime.
    ///
    /// # Errors
    /// If the caches cannot be created or the address cannot be bound.
    pub async fn start(config: ServerConfig) -> anyhow::Result<Self> {
        if let Some(refusal) = config.protected_mode_refusal() {
            anyhow::bail!(refusal);
        }
        let tls = match &config.server.tls {
            Some(settings) => Some(Arc::new(
                tls::Tls::load(settings).context("load the TLS certificate ([server.tls])")?,
            )),
            None => None,
        };
        let security = Arc::new(
            security::Security::new(&config.security, config.server.password.clone())
                .context("set up security ([security])")?,
        );
        let listener = TcpListener::bind(config.server.bind)
            .await
            .with_context(|| format!("listen on {}", config.server.bind))?;
        let local_addr = listener.local_addr().context("read the bound address")?;
        let node_name = config
            .server
            .node_name
            .clone()
            .unwrap_or_else(|| local_addr.to_string());
        let data_dir = config.server.data_dir(&node_name);
        let holder = format!("weft server, node {node_name}, listening on {local_addr}");
        let stores = weft_store::StoreFactory::new(data_dir.clone())
            .with_holder(holder)
            .with_opener(
                weft_core::StoreKind::Postgres,
                Arc::new(
                    |cache: &str, _: &weft_core::CacheConfig, store: &weft_core::StoreConfig| {
                        let opened: Arc<dyn weft_store::Store> = Arc::new(
                            weft_store_pg::PgStore::open(cache, store)
                                .map_err(|e| e.to_string())?,
                        );
                        Ok(opened)
                    },
                ),
            );
        if config.server.data_dir.is_none() && config.server.cluster_address().is_some() {
            // Before the lock creates the directory: the warning is for its first start.
            warn_of_stores_shared_before(&data_dir);
        }
        // Before any store opens: a second server on the directory stops here, naming the
        // one that has it. Only servers whose configuration declares a file store lock it,
        // so servers without stores may share a working directory; a file store created
        // later (REST, another node's cache definition) still locks its own directory.
        let data_dir_lock = if config.declares_file_store() {
            Some(stores.lock_data_dir().with_context(|| {
                format!(
                    "lock the data directory {}: give each server its own (`data-dir`, `--data-dir`)",
                    data_dir.display()
                )
            })?)
        } else {
            None
        };
        let mut grid = config.server.grid_config(&node_name);
        if let (Some(grid), Some(tls)) = (grid.as_mut(), &config.server.cluster_tls) {
            grid.tls = Some(
                weft_grid::tls::ClusterTls::from_pem_files(&tls.certificate, &tls.key, &tls.ca)
                    .context("load the cluster's TLS files ([server.cluster-tls])")?,
            );
        }
        let prepared = grid.map(cluster::Prepared::new);
        let resp_function = prepared.as_ref().map(|prepared| {
            memcached::register_functions(prepared.functions(), &config.server);
            weft_rest::register_functions(prepared.functions());
            resp::register_functions(prepared.functions())
        });
        let stores: Arc<dyn weft_core::PersistenceFactory> = Arc::new(stores);
        let factory = match &prepared {
            Some(prepared) => prepared.persistence(stores),
            None => stores,
        };
        let manager_config = config.manager_config();
        // Preloading stores reads files: off the async workers.
        let manager = tokio::task::spawn_blocking(move || {
            CacheManager::with_persistence(
                manager_config,
                Arc::new(weft_core::SystemClock),
                Some(factory),
            )
        })
        .await
        .context("create the caches")?
        .context("create the caches")?;
        manager
            .start_reaper()
            .context("start the expiration reaper")?;
        let resp_swaps_file = data_dir_lock
            .is_some()
            .then(|| data_dir.join(resp::databases::SWAPS_FILE));
        if let Some(path) = &resp_swaps_file {
            resp::databases::load(path, &manager)
                .context("restore the RESP databases SWAPDB exchanged")?;
        }
        if manager.cache(&config.server.memcached_cache).is_none() {
            anyhow::bail!(
                "memcached-cache `{}` names no cache",
                config.server.memcached_cache
            );
        }
        let memcached_listener = match config.server.memcached_listen {
            Some(address) => Some(
                TcpListener::bind(address)
                    .await
                    .with_context(|| format!("listen on {address} (memcached-listen)"))?,
            ),
            None => None,
        };
        let memcached_addr = match &memcached_listener {
            Some(listener) => Some(
                listener
                    .local_addr()
                    .context("read the bound memcached address")?,
            ),
            None => None,
        };
        let (shutdown, _) = watch::channel(false);
        let cluster = match prepared {
            Some(prepared) => {
                Some(cluster::Cluster::start(prepared, local_addr, manager.clone()).await?)
            }
            None => None,
        };
        let lifecycle = Arc::new(lifecycle::Lifecycle::new(
            cluster.as_ref().map(|cluster| Arc::clone(cluster.node())),
        ));
        let telemetry = Arc::new(telemetry::Telemetry::default());
        let metrics_telemetry = Arc::clone(&telemetry);
        let mut rest_state = weft_rest::RestState::new(manager.clone())
            .with_server_metrics(move |out| metrics_telemetry.write(out))
            .with_node_name(node_name)
            .with_shutdown({
                let lifecycle = Arc::clone(&lifecycle);
                move || lifecycle.request_stop()
            })
            .with_readiness({
                let lifecycle = Arc::clone(&lifecycle);
                move || lifecycle.readiness()
            });
        {
            // Always: whether clients must authenticate may change while the server runs
            // (RESP's CONFIG SET requirepass); the guard lets everyone by while none must.
            let security = Arc::clone(&security);
            let manager = manager.clone();
            rest_state = rest_state.with_guard(Arc::new(move |access| {
                authorization::rest_verdict(&security, &manager, access)
            }));
        }
        let routed = Arc::new(cluster::Routed::default());
        if let Some(cluster) = &cluster {
            rest_state = rest_state
                .with_cluster_view(cluster::view(cluster.node(), &routed))
                .with_forwarder(Arc::new(cluster::RestForwarder::new(
                    Arc::clone(cluster.node()),
                    Arc::clone(&routed),
                )));
        }
        let rest_router = weft_rest::router(rest_state);
        let redis_config = resp::commands::config::RedisConfig::new(&config.server, local_addr);
        let acl = resp::acl::Acl::new(config.server.password.as_deref(), security.has_users());
        let context = Arc::new(ServerContext {
            manager,
            redis_config,
            acl,
            slowlog: resp::commands::slowlog::SlowLog::default(),
            latency: resp::commands::latency::LatencyMonitor::default(),
            scripting: resp::commands::scripting::Scripting::default(),
            settings: config.server,
            started: Instant::now(),
            local_addr,
            next_client_id: AtomicU64::new(0),
            connected_clients: AtomicUsize::new(0),
            admission: admission::Admission::default(),
            total_connections: AtomicU64::new(0),
            total_commands: AtomicU64::new(0),
            shutdown,
            lifecycle,
            rest_router,
            hotrod: hotrod::HotRodState::default(),
            list_waiters: resp::commands::lists::Waiters::default(),
            transaction_gate: parking_lot::RwLock::new(()),
            push: resp::push::PushHub::default(),
            memcached: memcached::MemcachedState::default(),
            memcached_addr,
            cluster: cluster.as_ref().map(|cluster| Arc::clone(cluster.node())),
            routed,
            tls,
            security,
            resp_swaps_file,
            pause: resp::clients::Pause::default(),
            command_stats: resp::commands::stats::CommandStats::default(),
            keyspace_events: resp::commands::notify::KeyspaceEvents::default(),
            telemetry,
        });
        context.keyspace_events.bind(&context);
        for cache in context.manager.caches() {
            if cache.config().resp_database.is_some() {
                resp::commands::notify::watch_cache(&context, &cache);
            }
        }
        tokio::spawn(Arc::clone(&context.security).watch(context.shutdown_signal()));
        if let Some(tls) = &context.tls {
            tokio::spawn(tls::watch(Arc::clone(tls), context.shutdown_signal()));
        }
        if let Some(function) = &resp_function {
            function.attach(&context);
        }
        if let Some(node) = &context.cluster {
            node.events().on_message(
                resp::commands::pubsub::TOPIC,
                resp::commands::pubsub::receive_published(&context),
            );
        }
        let accept_task = tokio::spawn(accept_loop(
            listener,
            memcached_listener,
            Arc::clone(&context),
        ));
        tracing::info!(address = %local_addr, memcached = ?memcached_addr, tls = context.tls.is_some(), caches = ?context.manager.cache_names(), data_dir = %data_dir.display(), "weft server listening (Hot Rod, RESP, memcached, HTTP)");
        Ok(Self {
            context,
            accept_task,
            cluster,
            data_dir_lock,
        })
    }

    /// The address the server listens on.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.context.local_addr
    }

    /// The server's shared state.
    #[must_use]
    pub fn context(&self) -> &Arc<ServerContext> {
        &self.context
    }

    /// Stops gracefully, in an order no client notices (Infinispan's graceful shutdown is
    /// the model):
    ///
    /// 1. the server accepts no new connection and reports not ready (draining);
    /// 2. a clustered node leaves the cluster while its open connections are still
    ///    answered: what they send meanwhile runs at the members that own the keys now, and
    ///    Hot Rod clients receive the topology without this node with those answers;
    /// 3. every connection finishes what it runs and closes (at most `shutdown-grace-secs`);
    /// 4. the node answers what other members sent it before they learned it left, then
    ///    stops its cluster loops;
    /// 5. the stores are stopped (synced) and the data directory unlocked.
    ///
    /// Steps 2 and 3 together take at most `shutdown-grace-secs` (the drain timeout).
    pub async fn shutdown(self) {
        self.context.lifecycle.start_draining();
        let grace = Duration::from_secs(self.context.settings.shutdown_grace_secs);
        let deadline = tokio::time::Instant::now() + grace;
        if let Some(cluster) = &self.cluster
            && tokio::time::timeout_at(deadline, cluster.leave())
                .await
                .is_err()
        {
            tracing::warn!(
                "this node had not left the cluster when the drain timeout (shutdown-grace-secs) ran out; stopping: the others detect it"
            );
        }
        let _ = self.context.shutdown.send(true);
        // Connections get a moment to answer what they read, even when the leave took all.
        let deadline = deadline.max(tokio::time::Instant::now() + stream::CLOSE_LINGER);
        if tokio::time::timeout_at(deadline, self.accept_task)
            .await
            .is_err()
        {
            tracing::warn!(
                "connections still open when the drain timeout (shutdown-grace-secs) ran out; closing them"
            );
        }
        if let Some(cluster) = self.cluster {
            cluster.stopped().await;
        }
        self.context.manager.shutdown();
        // The stores are stopped: another server may have the directory now.
        drop(self.data_dir_lock);
        tracing::info!("weft server stopped");
    }
}

/// Warns when a clustered node's default data directory is new but the directory above it
/// holds file stores directly: the layout from before nodes had a directory each, where every
/// node of one working directory wrote into the same stores. They are not read from there.
fn warn_of_stores_shared_before(node_dir: &std::path::Path) {
    let old: Vec<_> = stores_shared_before(node_dir)
        .iter()
        .map(|store| store.display().to_string())
        .collect();
    if !old.is_empty() {
        tracing::warn!(
            stores = ?old,
            node_dir = %node_dir.display(),
            "file stores found where clustered nodes kept them before each node had a data directory of its own; this node keeps its stores in its own directory and does not read those (check them with `weft store check`, then move one node's into its directory, or set `data-dir`)"
        );
    }
}

/// The file stores directly in the parent of `node_dir` when `node_dir` does not exist yet.
fn stores_shared_before(node_dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Some(parent) = node_dir.parent() else {
        return Vec::new();
    };
    if node_dir.exists() {
        return Vec::new();
    }
    let Ok(survey) = weft_store::file::survey(parent) else {
        return Vec::new();
    };
    survey
        .stores
        .into_iter()
        .filter(|store| store.parent() == Some(parent))
        .collect()
}

/// Which listener accepted a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    /// The shared port: the protocol is detected.
    Shared,
    /// `memcached-listen`: every connection is memcached.
    Memcached,
}

/// Accepts from the shared listener or the memcached one, whichever has a connection.
async fn accept_either(
    shared: &TcpListener,
    memcached: Option<&TcpListener>,
) -> std::io::Result<(TcpStream, SocketAddr, Port)> {
    let from_memcached = async {
        match memcached {
            Some(listener) => listener.accept().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        accepted = shared.accept() => accepted.map(|(stream, peer)| (stream, peer, Port::Shared)),
        accepted = from_memcached => accepted.map(|(stream, peer)| (stream, peer, Port::Memcached)),
    }
}

async fn accept_loop(
    listener: TcpListener,
    memcached: Option<TcpListener>,
    context: Arc<ServerContext>,
) {
    let mut draining = context.lifecycle.draining_signal();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = accept_either(&listener, memcached.as_ref()) => match accepted {
                Ok((stream, peer, port)) => {
                    // The first request's deadline counts from here, not from when the
                    // connection's task first runs.
                    let accepted = tokio::time::Instant::now();
                    let deadline = deadline::RequestDeadline::new(&context.settings, accepted);
                    match admission::admit(&context, peer) {
                        Ok(slot) => {
                            let context = Arc::clone(&context);
                            connections.spawn(serve_connection(stream, peer, slot, deadline, context, port));
                        }
                        Err(admission::Refusal::Full) => {
                            context.telemetry.refused(telemetry::Refused::ConnectionsMax);
                            tracing::warn!(%peer, "connection refused: connections-max reached");
                        }
                        Err(admission::Refusal::AddressFull) => {
                            context.telemetry.refused(telemetry::Refused::PerAddressMax);
                            tracing::warn!(%peer, "connection refused: connections-per-address-max reached for this address");
                        }
                    }
                }
                Err(error) => {
                    // Usually EMFILE/ENFILE: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = stopped(&mut draining) => break,
        }
    }
    drop(listener);
    drop(memcached);
    while connections.join_next().await.is_some() {}
}

/// Serves one admitted connection; `_slot` gives its place back when it ends.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    _slot: admission::Slot,
    mut deadline: deadline::RequestDeadline,
    context: Arc<ServerContext>,
    port: Port,
) {
    let _ = stream.set_nodelay(true);
    // A connection that has sent nothing yet has nothing to finish: shutdown closes it
    // at once instead of waiting for the first-request deadline.
    let mut shutdown = context.shutdown_signal();
    let opened = tokio::select! {
        opened = open(stream, port, &deadline, &context) => opened,
        () = stopped(&mut shutdown) => Err(std::io::Error::other("server shutting down")),
    };
    let (conn, protocol, prefix) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            tracing::debug!(%peer, %error, "connection closed before its protocol was known");
            return;
        }
    };
    deadline.received(prefix.len());
    let counted = match protocol {
        Protocol::Resp => Some(telemetry::Protocol::Resp),
        Protocol::Http => Some(telemetry::Protocol::Http),
        Protocol::HotRod => Some(telemetry::Protocol::HotRod),
        Protocol::MemcachedText | Protocol::MemcachedBinary => Some(telemetry::Protocol::Memcached),
        _ => None,
    };
    let _open = counted.map(|protocol| context.telemetry.connection(protocol));
    match protocol {
        Protocol::Resp => {
            resp::serve(conn, prefix, peer, Arc::clone(&context), deadline).await;
        }
        Protocol::Http => {
            http::serve(conn, prefix, peer, Arc::clone(&context), &deadline).await;
        }
        Protocol::HotRod => {
            hotrod::serve(conn, prefix, peer, Arc::clone(&context), deadline).await;
        }
        Protocol::MemcachedText | Protocol::MemcachedBinary => {
            let dialect = if protocol == Protocol::MemcachedText {
                memcached::Dialect::Text
            } else {
                memcached::Dialect::Binary
            };
            memcached::serve(conn, prefix, peer, Arc::clone(&context), dialect, deadline).await;
        }
        other => {
            tracing::debug!(%peer, protocol = ?other, "connection closed: protocol not served");
        }
    }
}

/// Reads a connection's first bytes, completes its TLS handshake if they open one, and
/// tells its protocol (on the memcached port, text or binary by the first byte); gives up
/// at the first-request deadline.
async fn open(
    mut stream: TcpStream,
    port: Port,
    deadline: &deadline::RequestDeadline,
    context: &ServerContext,
) -> std::io::Result<(Conn, Protocol, bytes::BytesMut)> {
    let mut first = buffers::new();
    detect::within(deadline.at(), detect::read_some(&mut stream, &mut first)).await?;
    let mut conn = if first.first() == Some(&tls::HANDSHAKE_RECORD) {
        let Some(tls) = &context.tls else {
            return Err(std::io::Error::other(
                "a TLS ClientHello, and TLS is not configured ([server.tls])",
            ));
        };
        let session = detect::within(deadline.at(), tls.accept(stream, first)).await?;
        first = buffers::new();
        Conn::Tls(Box::new(session))
    } else {
        if context
            .tls
            .as_ref()
            .is_some_and(|tls| !tls.settings().plaintext)
        {
            return Err(std::io::Error::other(
                "a plaintext client, and this server takes TLS only ([server.tls] plaintext = false)",
            ));
        }
        Conn::Plain(stream)
    };
    if port == Port::Memcached {
        if first.is_empty() {
            detect::within(deadline.at(), detect::read_some(&mut conn, &mut first)).await?;
        }
        let protocol =
            match memcached::Dialect::of_first_byte(first.first().copied().unwrap_or_default()) {
                memcached::Dialect::Text => Protocol::MemcachedText,
                memcached::Dialect::Binary => Protocol::MemcachedBinary,
            };
        return Ok((conn, protocol, first));
    }
    if conn.alpn() == Some(tls::ALPN_HTTP1) {
        return Ok((conn, Protocol::Http, first));
    }
    let (protocol, prefix) = detect::detect(&mut conn, first, deadline.at()).await?;
    if protocol == Protocol::Tls {
        return Err(std::io::Error::other("a TLS ClientHello inside TLS"));
    }
    Ok((conn, protocol, prefix))
}

/// Resolves once the server is shutting down, including when it already was before this
/// receiver was created (which `watch::Receiver::changed` would miss).
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    // An error means the sender is gone, i.e. the server is gone: stop too.
    let _ = shutdown.wait_for(|&stop| stop).await;
}

/// Runs a server until Ctrl-C or SIGTERM, then shuts it down cleanly.
///
/// # Errors
/// If the server cannot start.
pub async fn run_until_signal(config: ServerConfig) -> anyhow::Result<()> {
    let server = Server::start(config).await?;
    let lifecycle = Arc::clone(&server.context.lifecycle);
    tokio::select! {
        () = wait_for_signal() => {}
        () = lifecycle.stop_requested() => {}
    }
    tracing::info!("shutdown requested");
    server.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot watch SIGTERM; only Ctrl-C stops the server");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a clustered node's first start finds the stores nodes shared before each had a
    // directory (to warn of them), and nothing once its own directory exists or when the
    // stores are other nodes' in directories of their own.
    #[test]
    fn stores_from_before_per_node_directories_are_found() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let data = dir.path().join("weft-data");
        let node_a = data.join("a");
        for store in [data.join("default"), data.join("b").join("default")] {
            std::fs::create_dir_all(&store).unwrap_or_else(|e| panic!("mkdir: {e}"));
            std::fs::write(store.join("00000001.log"), b"").unwrap_or_else(|e| panic!("{e}"));
        }
        assert_eq!(stores_shared_before(&node_a), vec![data.join("default")]);
        std::fs::create_dir_all(&node_a).unwrap_or_else(|e| panic!("mkdir: {e}"));
        assert!(stores_shared_before(&node_a).is_empty());
    }
}
