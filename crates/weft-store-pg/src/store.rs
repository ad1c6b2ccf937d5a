//! [`PgStore`]: the `Store` trait over one PostgreSQL table.
//!
//! The trait is synchronous submit-then-wait, PostgreSQL's client is async. The store runs
//! its own small tokio runtime; callers never enter it. Submitted changes go to a queue
//! (under a mutex) and get a position; one writer task takes batches from the queue,
//! coalesces them per key and applies each in one transaction, then advances the settled
//! position and wakes waiters, blocking ones through a `Condvar` and async ones through a
//! `watch`. Reads are spawned on the runtime and the calling thread waits on a std channel,
//! so any thread may call them, a tokio worker of another runtime included.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod};
use tokio::runtime::{Handle, Runtime};
use tokio::sync::{Notify, Semaphore, watch};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};
use weft_core::entry::StoredExpiration;
use weft_core::persistence::BoxFuture;
use weft_core::{CacheEntry, Payload, StoreConfig, Structure, StructureCell};
use weft_store::{Characteristics, Modification, Store, StoreError};

use crate::queue::{Change, Pending, Queue, Queued, Step, plan};
use crate::table::{FORM_PLAIN, FORM_STRUCTURE, Table};

/// How long opening a connection may take before it fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a caller waits for a free pooled connection.
const POOL_WAIT_TIMEOUT: Duration = Duration::from_secs(30);
/// Changes waiting for the writer at most; submitters wait while the queue is this full.
pub const PENDING_CHANGES_MAX: usize = 16_384;
/// Changes in one transaction at most.
pub const BATCH_CHANGES_MAX: usize = 1_024;
/// Bytes of keys and values in one transaction, roughly, at most (one larger change still
/// goes alone).
pub const BATCH_BYTES_MAX: usize = 8 << 20;
/// Failed batches whose outcome is kept for their waiters; one more poisons the store.
pub const FAILED_BATCHES_MAX: usize = 1_024;
/// Rows fetched from the cursor of a publish at a time.
const PUBLISH_ROWS_PER_FETCH: i32 = 256;
/// Fetched chunks of a publish waiting for the caller at most.
const PUBLISH_CHUNKS_IN_FLIGHT: usize = 4;
/// Threads of the store's runtime.
const RUNTIME_THREADS: usize = 2;
/// Bytes of a key quoted in an error message at most.
const KEY_SHOWN_BYTES_MAX: usize = 64;

/// A cache's entries in a PostgreSQL table.
///
/// Writes are queued and applied in batches, one transaction each, in submission order;
/// `wait_durable` returns once the transaction holding the position has committed. A failed
/// transaction (the server went away, a deadlock with another node on a shared table) fails
/// the waiters of that batch with the error and the store goes on with the next batch: no
/// retry, since the changes may be stale by then and the caller is told. Only after
/// [`FAILED_BATCHES_MAX`] failures does the store refuse writes (poisoned), because it
/// cannot keep reporting older failures without bound.
pub struct PgStore {
    shared: Arc<Shared>,
    /// Taken and shut down on drop.
    runtime: Option<Runtime>,
    handle: Handle,
}

/// What the store's callers and its writer task share.
struct Shared {
    table: Table,
    server: String,
    /// Connections for reads, purges and drops.
    pool: Pool,
    /// The writer's connection.
    writer_pool: Pool,
    characteristics: Characteristics,
    state: Mutex<State>,
    /// Signalled when `settled` advances, the writer exits, or the store is poisoned.
    settled_changed: Condvar,
    /// Signalled when the writer takes changes off the queue.
    room: Condvar,
    /// Wakes the writer.
    writer_wake: Notify,
    /// `(settled position, writer gone)` for async waiters.
    settled_watch: watch::Sender<(u64, bool)>,
    max_version: AtomicU64,
    stopped: AtomicBool,
}

#[derive(Debug)]
struct State {
    queue: Queue,
    /// The position of the last change submitted.
    position: u64,
    /// Every change up to here is committed or failed.
    settled: u64,
    /// Batches that failed: `(first position, last position, error)`, oldest first.
    failures: Vec<(u64, u64, StoreError)>,
    /// No new changes are accepted.
    stopped: bool,
    poisoned: Option<String>,
    /// The writer task ended (stopped, or its runtime went away).
    writer_gone: bool,
}

impl State {
    fn check_writable(&self, characteristics: Characteristics) -> Result<(), StoreError> {
        if let Some(reason) = &self.poisoned {
            return Err(StoreError::Poisoned(reason.clone()));
        }
        if self.stopped {
            return Err(StoreError::Stopped);
        }
        if characteristics.read_only {
            return Err(StoreError::ReadOnly);
        }
        Ok(())
    }

    /// The outcome of waiting for `position`, once settled.
    fn outcome(&self, position: u64) -> Result<(), StoreError> {
        match self
            .failures
            .iter()
            .find(|(first, last, _)| (*first..=*last).contains(&position))
        {
            Some((_, _, error)) => Err(error.clone()),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("server", &self.shared.server)
            .field("table", &self.shared.table.name)
            .field("characteristics", &self.shared.characteristics)
            .finish_non_exhaustive()
    }
}

/// The error's message and every cause under it, joined by ": ".
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A pooled connection and `sql` prepared on it; errors say `context`.
async fn prepared(
    pool: &deadpool_postgres::Pool,
    sql: &str,
    context: &str,
) -> Result<(deadpool_postgres::Object, tokio_postgres::Statement), StoreError> {
    let client = pool
        .get()
        .await
        .map_err(|e| StoreError::io(context, pool_error(e)))?;
    let statement = client
        .prepare_cached(sql)
        .await
        .map_err(|e| StoreError::io(context, describe(&e)))?;
    Ok((client, statement))
}

fn pool_error(error: PoolError) -> String {
    match error {
        PoolError::Backend(error) => describe(&error),
        PoolError::Timeout(_) => format!("{error} (connect timeout {CONNECT_TIMEOUT:?})"),
        other => other.to_string(),
    }
}

fn to_sql_integer(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn from_sql_integer(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

fn segments_param(segments: &[u32]) -> Result<Vec<i32>, StoreError> {
    segments
        .iter()
        .map(|&segment| {
            i32::try_from(segment).map_err(|_| {
                StoreError::io("use a segment", format!("segment {segment} too large"))
            })
        })
        .collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

/// Same rule as the file store: an entry is dead once its deadline is reached.
fn is_dead(entry: &CacheEntry, now_ms: u64) -> bool {
    entry
        .metadata()
        .expires_at_ms()
        .is_some_and(|deadline| deadline <= now_ms)
}

/// Client flags as the `integer` column holds them: the same 32 bits, read as signed.
fn flags_to_sql(flags: u32) -> i32 {
    i32::from_le_bytes(flags.to_le_bytes())
}

fn flags_from_sql(flags: i32) -> u32 {
    u32::from_le_bytes(flags.to_le_bytes())
}

/// A key for an error message: printable ASCII as is, other bytes escaped, cut short.
fn shown_key(key: &[u8]) -> String {
    let shown = key.get(..KEY_SHOWN_BYTES_MAX).unwrap_or(key);
    let mut text = shown.escape_ascii().to_string();
    if shown.len() < key.len() {
        text.push_str("...");
    }
    text
}

/// Why a row could not be read back.
#[derive(Debug)]
enum RowError {
    /// A column is missing or of another type.
    Column(tokio_postgres::Error),
    /// The columns do not make an entry: a structure that does not decode, an unknown form.
    Malformed { key: Vec<u8>, reason: String },
}

impl From<tokio_postgres::Error> for RowError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Column(error)
    }
}

impl RowError {
    /// The store's error, for what `context` says was being done (it names the table).
    fn into_store_error(self, context: &str) -> StoreError {
        match self {
            Self::Column(error) => StoreError::io(context, describe(&error)),
            Self::Malformed { key, reason } => StoreError::io(
                context,
                format!("the row of key \"{}\" {reason}", shown_key(&key)),
            ),
        }
    }
}

fn entry_from_row(row: &Row) -> Result<CacheEntry, RowError> {
    let key: &[u8] = row.try_get(0)?;
    let value: &[u8] = row.try_get(1)?;
    let version: i64 = row.try_get(2)?;
    let created_ms: Option<i64> = row.try_get(3)?;
    let lifespan_ms: Option<i64> = row.try_get(4)?;
    let max_idle_ms: Option<i64> = row.try_get(5)?;
    let last_used_ms: i64 = row.try_get(6)?;
    let flags: i32 = row.try_get(7)?;
    let form: i16 = row.try_get(8)?;
    let expiration = StoredExpiration {
        created_ms: created_ms.map(from_sql_integer),
        lifespan_ms: lifespan_ms.map(from_sql_integer),
        max_idle_ms: max_idle_ms.map(from_sql_integer),
    };
    let cell;
    let payload = match form {
        FORM_PLAIN => Payload::Bytes(value, flags_from_sql(flags)),
        FORM_STRUCTURE => {
            // The database has no checksum over the value: a row edited by hand, or written
            // by a buggy or newer writer, must fail the read, not the node.
            let structure = Structure::decode(value).map_err(|error| RowError::Malformed {
                key: key.to_vec(),
                reason: format!(
                    "has form {FORM_STRUCTURE} (a structure) but its value is not one: {error}"
                ),
            })?;
            let charge = structure.heap_bytes();
            cell = StructureCell::new(structure);
            Payload::Structure(&cell, charge)
        }
        other => {
            return Err(RowError::Malformed {
                key: key.to_vec(),
                reason: format!(
                    "has form {other}, which this Weft does not know (0 = bytes, 1 = structure)"
                ),
            });
        }
    };
    Ok(CacheEntry::restored_payload(
        key,
        payload,
        expiration,
        from_sql_integer(last_used_ms),
        from_sql_integer(version),
    ))
}

fn key_from_row(row: &Row) -> Result<Vec<u8>, RowError> {
    Ok(row.try_get::<_, &[u8]>(0).map(<[u8]>::to_vec)?)
}

impl PgStore {
    /// Connects to the database of `config.connection_url` and opens (creating it if
    /// missing, unless read-only) the table of `cache_name`: `config.table`, or
    /// `weft_<cache name>` sanitized.
    ///
    /// # Errors
    /// `StoreError::Io` when no URL is configured, the URL or table name is invalid, the
    /// server cannot be reached within 5 seconds (context `connect to PostgreSQL at
    /// host:port`), or the table cannot be created or read.
    pub fn open(cache_name: &str, config: &StoreConfig) -> Result<Self, StoreError> {
        let url = config.connection_url.as_deref().ok_or_else(|| {
            StoreError::io(
                format!("open the PostgreSQL store of cache {cache_name:?}"),
                "no connection-url is configured",
            )
        })?;
        // The URL is never quoted in errors: it may hold a password.
        let mut pg_config: tokio_postgres::Config =
            url.parse().map_err(|e: tokio_postgres::Error| {
                StoreError::io("parse the PostgreSQL connection-url", describe(&e))
            })?;
        if pg_config.get_connect_timeout().is_none() {
            pg_config.connect_timeout(CONNECT_TIMEOUT);
        }
        if pg_config.get_application_name().is_none() {
            pg_config.application_name("weft");
        }
        let server = server_of(&pg_config);
        let table = Table::new(cache_name, config.table.as_deref())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("weft-store-pg")
            .enable_all()
            .build()
            .map_err(|e| StoreError::io("start the PostgreSQL store's runtime", e))?;
        // The writer has a pool (of one) of its own, so that writes never wait behind reads:
        // a publish holds its connection while the caller visits the rows, and the caller
        // may write and wait for durability meanwhile.
        let build_pool = |size: usize| {
            let manager = Manager::from_config(
                pg_config.clone(),
                NoTls,
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(size)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .wait_timeout(Some(POOL_WAIT_TIMEOUT))
                .create_timeout(Some(CONNECT_TIMEOUT + Duration::from_secs(1)))
                .recycle_timeout(Some(CONNECT_TIMEOUT))
                .build()
                .map_err(|e| StoreError::io("build the PostgreSQL connection pool", e))
        };
        let pool = build_pool(config.pool_size.max(1))?;
        let writer_pool = build_pool(1)?;
        let characteristics = Characteristics {
            shared: config.shared,
            read_only: config.read_only,
            transactional: false,
            segmented: true,
            expiration_aware: true,
        };
        let setup = {
            let pool = pool.clone();
            let table = table.clone();
            let server = server.clone();
            let read_only = config.read_only;
            run_on(runtime.handle(), async move {
                let mut client = pool.get().await.map_err(|e| {
                    StoreError::io(format!("connect to PostgreSQL at {server}"), pool_error(e))
                })?;
                let failed = |e: tokio_postgres::Error| {
                    StoreError::io(
                        format!("create PostgreSQL table {}", table.name),
                        describe(&e),
                    )
                };
                if !read_only {
                    let transaction = client.transaction().await.map_err(failed)?;
                    transaction
                        .execute(table.lock_for_creation, &[&table.name])
                        .await
                        .map_err(failed)?;
                    transaction
                        // "already exists, skipping" notices would reach the server's log.
                        .batch_execute(&format!(
                            "SET LOCAL client_min_messages = warning; {}; {}",
                            table.create_table, table.create_index
                        ))
                        .await
                        .map_err(failed)?;
                    transaction.commit().await.map_err(failed)?;
                }
                let read_failed = |e: tokio_postgres::Error| {
                    StoreError::io(
                        format!("read PostgreSQL table {}", table.name),
                        describe(&e),
                    )
                };
                // A table an older Weft created lacks `flags` and `form`. Probed first
                // rather than always altered: ALTER TABLE locks the table exclusively, even
                // when there is nothing to add, and would stall other nodes' reads.
                let legacy = match client.query(&table.probe_columns, &[]).await {
                    Ok(_) => false,
                    Err(e) if e.code() == Some(&SqlState::UNDEFINED_COLUMN) => {
                        if !read_only {
                            let failed = |e: tokio_postgres::Error| {
                                StoreError::io(
                                    format!(
                                        "add the flags and form columns to PostgreSQL table {}",
                                        table.name
                                    ),
                                    describe(&e),
                                )
                            };
                            let transaction = client.transaction().await.map_err(failed)?;
                            transaction
                                .execute(table.lock_for_creation, &[&table.name])
                                .await
                                .map_err(failed)?;
                            transaction
                                // "already exists, skipping" when another node was first.
                                .batch_execute(&format!(
                                    "SET LOCAL client_min_messages = warning; {}",
                                    table.add_columns
                                ))
                                .await
                                .map_err(failed)?;
                            transaction.commit().await.map_err(failed)?;
                            tracing::info!(table = %table.name, "added the flags and form columns to a PostgreSQL table created by an older Weft");
                        }
                        read_only
                    }
                    Err(e) => return Err(read_failed(e)),
                };
                let row = client
                    .query_one(&table.max_version, &[])
                    .await
                    .map_err(read_failed)?;
                let max_version: i64 = row.try_get(0).map_err(read_failed)?;
                Ok((from_sql_integer(max_version), legacy))
            })
        };
        let (max_version, table) = match setup {
            // A read-only store may not add the columns: it reads every row as plain bytes.
            Ok((max_version, true)) => (max_version, table.legacy()),
            Ok((max_version, false)) => (max_version, table),
            Err(error) => {
                runtime.shutdown_background();
                return Err(error);
            }
        };
        let (settled_watch, _) = watch::channel((0, false));
        let shared = Arc::new(Shared {
            table,
            server,
            pool,
            writer_pool,
            characteristics,
            state: Mutex::new(State {
                queue: Queue::default(),
                position: 0,
                settled: 0,
                failures: Vec::new(),
                stopped: false,
                poisoned: None,
                writer_gone: false,
            }),
            settled_changed: Condvar::new(),
            room: Condvar::new(),
            writer_wake: Notify::new(),
            settled_watch,
            max_version: AtomicU64::new(max_version),
            stopped: AtomicBool::new(false),
        });
        runtime.spawn(write_loop(Arc::clone(&shared)));
        tracing::debug!(server = %shared.server, table = %shared.table.name, "PostgreSQL store open");
        Ok(Self {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            shared,
        })
    }

    /// The table's name.
    #[must_use]
    pub fn table_name(&self) -> &str {
        &self.shared.table.name
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    /// Queues changes in order; returns the position of the last one.
    fn submit(&self, changes: impl IntoIterator<Item = Change>) -> Result<u64, StoreError> {
        let mut state = self.state();
        state.check_writable(self.shared.characteristics)?;
        while state.queue.waiting_len() >= PENDING_CHANGES_MAX {
            state = self
                .shared
                .room
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.check_writable(self.shared.characteristics)?;
        }
        for change in changes {
            if let Change::Write { entry, .. } = &change {
                self.shared
                    .max_version
                    .fetch_max(entry.version(), Ordering::Relaxed);
            }
            state.position += 1;
            let position = state.position;
            state.queue.push(position, change);
        }
        let position = state.position;
        drop(state);
        self.shared.writer_wake.notify_one();
        Ok(position)
    }

    /// Waits until everything submitted so far is settled, so that a query sees it.
    fn flush(&self) {
        let mut state = self.state();
        let position = state.position;
        while state.settled < position && !state.writer_gone {
            state = self
                .shared
                .settled_changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn check_running(&self) -> Result<(), StoreError> {
        if self.shared.stopped.load(Ordering::Acquire) {
            return Err(StoreError::Stopped);
        }
        Ok(())
    }

    /// Runs `task` on the store's runtime; the calling thread waits for its result.
    fn run<T: Send + 'static>(
        &self,
        task: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        run_on(&self.handle, task)
    }

    /// Streams the rows of a publish query to `visit`, decoded on the runtime.
    fn stream<T: Send + 'static>(
        &self,
        sql: &str,
        segments: &[u32],
        decode: fn(&Row) -> Result<T, RowError>,
        visit: &mut dyn FnMut(T),
    ) -> Result<(), StoreError> {
        self.check_running()?;
        if segments.is_empty() {
            return Ok(());
        }
        self.flush();
        let segments = segments_param(segments)?;
        let now = to_sql_integer(now_ms());
        let (sender, receiver) = mpsc::channel::<Result<Vec<T>, StoreError>>();
        // Bounds the chunks fetched ahead of the caller; the caller returns a permit per
        // chunk it visited, and closes the semaphore when it stops listening.
        let credit = Arc::new(Semaphore::new(PUBLISH_CHUNKS_IN_FLIGHT));
        struct CloseOnDrop(Arc<Semaphore>);
        impl Drop for CloseOnDrop {
            fn drop(&mut self) {
                self.0.close();
            }
        }
        let _close = CloseOnDrop(Arc::clone(&credit));
        let pool = self.shared.pool.clone();
        let sql = sql.to_owned();
        let table = self.shared.table.name.clone();
        let task_credit = Arc::clone(&credit);
        self.handle.spawn(async move {
            let context = format!("publish from PostgreSQL table {table}");
            let failed = |e: tokio_postgres::Error| StoreError::io(context.clone(), describe(&e));
            let result: Result<(), StoreError> = async {
                let mut client = pool
                    .get()
                    .await
                    .map_err(|e| StoreError::io(context.clone(), pool_error(e)))?;
                let transaction = client
                    .build_transaction()
                    .read_only(true)
                    .start()
                    .await
                    .map_err(failed)?;
                let statement = transaction.prepare_cached(&sql).await.map_err(failed)?;
                let portal = transaction
                    .bind(&statement, &[&segments, &now])
                    .await
                    .map_err(failed)?;
                loop {
                    let rows = transaction
                        .query_portal(&portal, PUBLISH_ROWS_PER_FETCH)
                        .await
                        .map_err(failed)?;
                    let last = rows.len() < usize::try_from(PUBLISH_ROWS_PER_FETCH).unwrap_or(0);
                    let chunk = rows
                        .iter()
                        .map(decode)
                        .collect::<Result<Vec<T>, _>>()
                        .map_err(|e| e.into_store_error(&context))?;
                    match task_credit.acquire().await {
                        Ok(permit) => permit.forget(),
                        Err(_) => return Ok(()), // the caller stopped listening
                    }
                    if sender.send(Ok(chunk)).is_err() || last {
                        return Ok(());
                    }
                }
            }
            .await;
            if let Err(error) = result {
                let _ = sender.send(Err(error));
            }
        });
        // The sender is dropped when the task ends: after the last chunk or an error, or if
        // the runtime was shut down under it.
        let mut answered = false;
        while let Ok(chunk) = receiver.recv() {
            for item in chunk? {
                visit(item);
            }
            credit.add_permits(1);
            answered = true;
        }
        // A successful query sends at least one (maybe empty) chunk.
        if answered {
            Ok(())
        } else {
            Err(StoreError::Stopped)
        }
    }

    /// Refuses new changes and waits until the writer has settled every queued one.
    /// Returns the first failure among the batches it waited for.
    fn stop_writes(&self) -> Result<(), StoreError> {
        let mut state = self.state();
        let settled_before = state.settled;
        state.stopped = true;
        self.shared.stopped.store(true, Ordering::Release);
        self.shared.room.notify_all();
        self.shared.writer_wake.notify_one();
        let position = state.position;
        while state.settled < position && !state.writer_gone {
            state = self
                .shared
                .settled_changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.settled < position {
            return Err(StoreError::io(
                format!("flush PostgreSQL table {}", self.shared.table.name),
                "the writer ended before every change was written",
            ));
        }
        match state
            .failures
            .iter()
            .find(|(_, last, _)| *last > settled_before)
        {
            Some((_, _, error)) => Err(error.clone()),
            None => Ok(()),
        }
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // Without a stop, queued changes are still written (best effort) before the
        // runtime goes away.
        if !self.shared.stopped.load(Ordering::Acquire)
            && let Err(error) = self.stop_writes()
        {
            tracing::warn!(table = %self.shared.table.name, %error, "PostgreSQL store dropped with unwritten changes");
        }
        if let Some(runtime) = self.runtime.take() {
            self.shared.pool.close();
            self.shared.writer_pool.close();
            // Never blocks, so dropping the store is safe even on a thread of another
            // runtime.
            runtime.shutdown_background();
        }
    }
}

/// `host:port` of every host in the configuration, for messages.
fn server_of(config: &tokio_postgres::Config) -> String {
    let ports = config.get_ports();
    let mut hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|host| match host {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .collect();
    if hosts.is_empty() {
        hosts = config
            .get_hostaddrs()
            .iter()
            .map(ToString::to_string)
            .collect();
    }
    if hosts.is_empty() {
        return format!("localhost:{}", ports.first().copied().unwrap_or(5432));
    }
    hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            // One port applies to every host; otherwise there is one per host.
            let port = ports
                .get(i)
                .or_else(|| ports.first())
                .copied()
                .unwrap_or(5432);
            format!("{host}:{port}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `task` on `handle`'s runtime and blocks this thread on a std channel for its
/// result (never `block_on`, which would panic on a thread of another runtime).
fn run_on<T: Send + 'static>(
    handle: &Handle,
    task: impl Future<Output = Result<T, StoreError>> + Send + 'static,
) -> Result<T, StoreError> {
    let (sender, receiver) = mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = sender.send(task.await);
    });
    receiver.recv().unwrap_or(Err(StoreError::Stopped))
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Marks the writer gone when its task ends, however it ends (even dropped by a runtime
/// shutdown), so that waiters never wait for a writer that is not there.
struct WriterGone(Arc<Shared>);

impl Drop for WriterGone {
    fn drop(&mut self) {
        let settled = {
            let mut state = self.0.lock();
            state.writer_gone = true;
            state.settled
        };
        self.0.settled_changed.notify_all();
        self.0.room.notify_all();
        self.0.settled_watch.send_replace((settled, true));
    }
}

/// The writer: takes batches off the queue and applies each in one transaction, until the
/// store is stopped and the queue is empty.
async fn write_loop(shared: Arc<Shared>) {
    let _gone = WriterGone(Arc::clone(&shared));
    loop {
        let batch = {
            let mut state = shared.lock();
            let batch = state.queue.take(BATCH_CHANGES_MAX, BATCH_BYTES_MAX);
            if batch.is_empty() && state.stopped {
                return;
            }
            batch
        };
        if batch.is_empty() {
            // A notification sent since the queue was looked at is kept as a permit, so
            // none is lost.
            shared.writer_wake.notified().await;
            continue;
        }
        shared.room.notify_all();
        let result = apply(&shared, &batch).await;
        let first = batch.first().map_or(0, |queued| queued.position);
        let last = batch.last().map_or(0, |queued| queued.position);
        {
            let mut state = shared.lock();
            state.queue.settle(&batch);
            if let Err(error) = result {
                tracing::error!(table = %shared.table.name, %error, changes = batch.len(), "a batch of writes to PostgreSQL failed; its waiters get the error");
                // Once poisoned no change is accepted, so the list stops growing after the
                // batches already queued.
                if state.failures.len() >= FAILED_BATCHES_MAX && state.poisoned.is_none() {
                    state.poisoned = Some(format!(
                        "{FAILED_BATCHES_MAX} batches of writes to PostgreSQL table {} failed, the last with: {error}",
                        shared.table.name
                    ));
                }
                state.failures.push((first, last, error));
            }
            state.settled = last;
        }
        shared.settled_changed.notify_all();
        shared.settled_watch.send_replace((last, false));
    }
}

/// Applies one batch in one transaction.
async fn apply(shared: &Shared, batch: &[Queued]) -> Result<(), StoreError> {
    let table = &shared.table;
    let failed = |e: tokio_postgres::Error| {
        StoreError::io(
            format!("write to PostgreSQL table {}", table.name),
            describe(&e),
        )
    };
    let mut client = shared.writer_pool.get().await.map_err(|e| {
        StoreError::io(
            format!("connect to PostgreSQL at {}", shared.server),
            pool_error(e),
        )
    })?;
    let transaction = client.transaction().await.map_err(failed)?;
    for step in plan(batch) {
        match step {
            Step::Keys {
                upserts,
                mut deletes,
            } => {
                let upserts = encode_structures(upserts, &mut deletes);
                if !upserts.is_empty() {
                    let columns = UpsertColumns::new(&upserts)?;
                    let statement = transaction
                        .prepare_cached(&table.upsert)
                        .await
                        .map_err(failed)?;
                    transaction
                        .execute(&statement, &columns.params())
                        .await
                        .map_err(failed)?;
                }
                if !deletes.is_empty() {
                    let keys: Vec<&[u8]> = deletes.iter().map(Bytes::as_ref).collect();
                    let statement = transaction
                        .prepare_cached(&table.delete_keys)
                        .await
                        .map_err(failed)?;
                    transaction
                        .execute(&statement, &[&keys])
                        .await
                        .map_err(failed)?;
                }
            }
            Step::RemoveSegments(segments) => {
                let segments = segments_param(&segments)?;
                let statement = transaction
                    .prepare_cached(&table.delete_segments)
                    .await
                    .map_err(failed)?;
                transaction
                    .execute(&statement, &[&segments])
                    .await
                    .map_err(failed)?;
            }
            Step::Clear => transaction
                .batch_execute(&table.truncate)
                .await
                .map_err(failed)?,
        }
    }
    transaction.commit().await.map_err(failed)
}

/// One row to upsert.
struct Upsert {
    segment: u32,
    entry: CacheEntry,
    /// The encoding of the entry's structure, if it holds one: the row's `value`.
    encoded: Option<Vec<u8>>,
}

/// The rows of `upserts`, with every structure encoded; a structure with no element left
/// becomes a delete of its key, in `deletes`.
///
/// Encoded here, when the batch is applied, rather than when the write was submitted:
/// writes are coalesced per key by then, so a structure changed many times between two
/// batches is encoded once, and the queue holds the entry (sharing its structure) rather
/// than a copy of every version. The row may then hold a newer state of the structure than
/// its version says; the newer write follows with its own version.
///
/// A structure only empties on its way out (Redis deletes the key, and the delete is queued
/// after this write), so writing no row is what the database will hold anyway, and a crash
/// in between cannot bring back an empty collection. A stream is the exception: it stays
/// when emptied (with its last ID and groups), so it is written.
fn encode_structures(upserts: Vec<(u32, CacheEntry)>, deletes: &mut Vec<Bytes>) -> Vec<Upsert> {
    let mut rows = Vec::with_capacity(upserts.len());
    let mut emptied = false;
    for (segment, entry) in upserts {
        // `None`: plain bytes; `Some(None)`: an empty structure.
        let encoding = entry.structure().map(|cell| {
            let structure = cell.lock();
            (!(structure.is_empty() && structure.deleted_when_empty())).then(|| structure.encode())
        });
        if let Some(None) = encoding {
            deletes.push(Bytes::copy_from_slice(entry.key()));
            emptied = true;
            continue;
        }
        rows.push(Upsert {
            segment,
            entry,
            encoded: encoding.flatten(),
        });
    }
    if emptied {
        // Rows are locked in key order, as `plan` sorted them.
        deletes.sort_unstable();
    }
    rows
}

/// The upsert's parameters: one array per column.
struct UpsertColumns<'a> {
    keys: Vec<&'a [u8]>,
    segments: Vec<i32>,
    values: Vec<&'a [u8]>,
    versions: Vec<i64>,
    created_ms: Vec<Option<i64>>,
    lifespan_ms: Vec<Option<i64>>,
    max_idle_ms: Vec<Option<i64>>,
    last_used_ms: Vec<i64>,
    expires_at_ms: Vec<Option<i64>>,
    flags: Vec<i32>,
    forms: Vec<i16>,
}

impl<'a> UpsertColumns<'a> {
    fn new(upserts: &'a [Upsert]) -> Result<Self, StoreError> {
        let count = upserts.len();
        let mut columns = Self {
            keys: Vec::with_capacity(count),
            segments: Vec::with_capacity(count),
            values: Vec::with_capacity(count),
            versions: Vec::with_capacity(count),
            created_ms: Vec::with_capacity(count),
            lifespan_ms: Vec::with_capacity(count),
            max_idle_ms: Vec::with_capacity(count),
            last_used_ms: Vec::with_capacity(count),
            expires_at_ms: Vec::with_capacity(count),
            flags: Vec::with_capacity(count),
            forms: Vec::with_capacity(count),
        };
        for Upsert {
            segment,
            entry,
            encoded,
        } in upserts
        {
            let metadata = entry.metadata();
            columns.keys.push(entry.key());
            columns.segments.extend(segments_param(&[*segment])?);
            match encoded {
                Some(encoded) => {
                    columns.values.push(encoded);
                    columns.forms.push(FORM_STRUCTURE);
                }
                None => {
                    columns.values.push(entry.value());
                    columns.forms.push(FORM_PLAIN);
                }
            }
            columns.flags.push(flags_to_sql(entry.user_flags()));
            columns.versions.push(to_sql_integer(metadata.version));
            columns
                .created_ms
                .push(metadata.created_ms.map(to_sql_integer));
            columns
                .lifespan_ms
                .push(metadata.lifespan_ms.map(to_sql_integer));
            columns
                .max_idle_ms
                .push(metadata.max_idle_ms.map(to_sql_integer));
            columns.last_used_ms.push(to_sql_integer(
                metadata.last_used_ms.or(metadata.created_ms).unwrap_or(0),
            ));
            columns
                .expires_at_ms
                .push(metadata.expires_at_ms().map(to_sql_integer));
        }
        Ok(columns)
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 11] {
        [
            &self.keys,
            &self.segments,
            &self.values,
            &self.versions,
            &self.created_ms,
            &self.lifespan_ms,
            &self.max_idle_ms,
            &self.last_used_ms,
            &self.expires_at_ms,
            &self.flags,
            &self.forms,
        ]
    }
}

impl Store for PgStore {
    fn characteristics(&self) -> Characteristics {
        self.shared.characteristics
    }

    fn load(&self, segment: u32, key: &[u8]) -> Result<Option<CacheEntry>, StoreError> {
        self.check_running()?;
        let now = now_ms();
        match self.state().queue.lookup(segment, key) {
            Pending::Written(entry) => return Ok((!is_dead(&entry, now)).then_some(entry)),
            Pending::Deleted => return Ok(None),
            Pending::Unknown => {}
        }
        let pool = self.shared.pool.clone();
        let sql = self.shared.table.load.clone();
        let table = self.shared.table.name.clone();
        let key = key.to_vec();
        self.run(async move {
            let context = format!("load from PostgreSQL table {table}");
            let failed = |e: tokio_postgres::Error| StoreError::io(context.clone(), describe(&e));
            let (client, statement) = prepared(&pool, &sql, &context).await?;
            let row = client
                .query_opt(&statement, &[&key, &to_sql_integer(now)])
                .await
                .map_err(failed)?;
            row.as_ref()
                .map(entry_from_row)
                .transpose()
                .map_err(|e| e.into_store_error(&context))
        })
    }

    fn write(&self, segment: u32, entry: &CacheEntry) -> Result<u64, StoreError> {
        self.submit([Change::Write {
            segment,
            entry: entry.clone(),
        }])
    }

    fn delete(&self, _segment: u32, key: &[u8]) -> Result<u64, StoreError> {
        self.submit([Change::Delete {
            key: Bytes::copy_from_slice(key),
        }])
    }

    fn write_batch(&self, batch: &[Modification]) -> Result<u64, StoreError> {
        if batch.is_empty() {
            self.state().check_writable(self.shared.characteristics)?;
            return Ok(self.position());
        }
        self.submit(batch.iter().map(|change| match change {
            Modification::Write { segment, entry } => Change::Write {
                segment: *segment,
                entry: entry.clone(),
            },
            Modification::Delete { key, .. } => Change::Delete { key: key.clone() },
        }))
    }

    fn position(&self) -> u64 {
        self.state().position
    }

    fn wait_durable(&self, position: u64) -> Result<(), StoreError> {
        let mut state = self.state();
        while state.settled < position {
            if state.writer_gone {
                return Err(StoreError::Stopped);
            }
            state = self
                .shared
                .settled_changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.outcome(position)
    }

    fn wait_durable_async(&self, position: u64) -> BoxFuture<Result<(), StoreError>> {
        let shared = Arc::clone(&self.shared);
        let mut receiver = self.shared.settled_watch.subscribe();
        Box::pin(async move {
            // The sender lives in `shared`, which this future holds: `wait_for` cannot fail.
            let _ = receiver
                .wait_for(|(settled, writer_gone)| *settled >= position || *writer_gone)
                .await;
            let state = shared.lock();
            if state.settled >= position {
                state.outcome(position)
            } else {
                Err(StoreError::Stopped)
            }
        })
    }

    fn publish(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(CacheEntry),
    ) -> Result<(), StoreError> {
        let sql = self.shared.table.publish.clone();
        self.stream(&sql, segments, entry_from_row, visit)
    }

    fn publish_keys(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreError> {
        let sql = self.shared.table.publish_keys.clone();
        self.stream(&sql, segments, key_from_row, &mut |key: Vec<u8>| {
            visit(&key)
        })
    }

    fn remove_segments(&self, segments: &[u32]) -> Result<u64, StoreError> {
        segments_param(segments)?;
        if segments.is_empty() {
            self.state().check_writable(self.shared.characteristics)?;
            return Ok(self.position());
        }
        self.submit([Change::RemoveSegments(Arc::from(segments))])
    }

    fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError> {
        self.state().check_writable(self.shared.characteristics)?;
        self.flush();
        let pool = self.shared.pool.clone();
        let sql = self.shared.table.purge.clone();
        let table = self.shared.table.name.clone();
        self.run(async move {
            let context = format!("purge PostgreSQL table {table}");
            let failed = |e: tokio_postgres::Error| StoreError::io(context.clone(), describe(&e));
            let (client, statement) = prepared(&pool, &sql, &context).await?;
            let purged = client
                .execute(&statement, &[&to_sql_integer(now_ms)])
                .await
                .map_err(failed)?;
            Ok(usize::try_from(purged).unwrap_or(usize::MAX))
        })
    }

    fn size(&self, segments: Option<&[u32]>) -> Result<usize, StoreError> {
        self.check_running()?;
        if segments.is_some_and(<[u32]>::is_empty) {
            return Ok(0);
        }
        let segments = segments.map(segments_param).transpose()?;
        self.flush();
        let pool = self.shared.pool.clone();
        let sql = match segments {
            None => self.shared.table.count.clone(),
            Some(_) => self.shared.table.count_segments.clone(),
        };
        let table = self.shared.table.name.clone();
        self.run(async move {
            let context = format!("count PostgreSQL table {table}");
            let failed = |e: tokio_postgres::Error| StoreError::io(context.clone(), describe(&e));
            let (client, statement) = prepared(&pool, &sql, &context).await?;
            let row = match &segments {
                None => client.query_one(&statement, &[]).await,
                Some(segments) => client.query_one(&statement, &[segments]).await,
            }
            .map_err(failed)?;
            let count: i64 = row.try_get(0).map_err(failed)?;
            Ok(usize::try_from(count).unwrap_or(0))
        })
    }

    fn clear(&self) -> Result<u64, StoreError> {
        self.submit([Change::Clear])
    }

    fn max_version(&self) -> u64 {
        self.shared.max_version.load(Ordering::Relaxed)
    }

    fn stop(&self) -> Result<(), StoreError> {
        if self.shared.stopped.load(Ordering::Acquire) {
            return Ok(());
        }
        // The runtime and its connections stay until the store is dropped, so that
        // `destroy` still works after a stop.
        self.stop_writes()
    }

    fn destroy(&self) {
        if let Err(error) = self.stop_writes() {
            tracing::warn!(table = %self.shared.table.name, %error, "changes lost while destroying the PostgreSQL store");
        }
        let pool = self.shared.pool.clone();
        let sql = self.shared.table.drop.clone();
        let table = self.shared.table.name.clone();
        let dropped = self.run(async move {
            let client = pool.get().await.map_err(|e| {
                StoreError::io(format!("drop PostgreSQL table {table}"), pool_error(e))
            })?;
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| StoreError::io(format!("drop PostgreSQL table {table}"), describe(&e)))
        });
        if let Err(error) = dropped {
            tracing::warn!(table = %self.shared.table.name, %error, "dropping the PostgreSQL table failed");
        }
    }
}
