//! Weft's PostgreSQL store: a cache's entries in one PostgreSQL table, implementing
//! [`weft_store::Store`].
//!
//! * [`PgStore`] — the store: changes are queued, coalesced per key and applied in batches,
//!   one transaction each, by a writer task on the store's own small tokio runtime; loads see
//!   queued changes before they are committed; publish, purge, size and clear are one
//!   statement each.
//! * `table` — the table's validated, quoted name and every SQL statement on it.
//! * `queue` — the uncommitted changes and how a batch becomes statements (no I/O).
//!
//! The table (created if missing) has one row per key: `key bytea` primary key, `segment`,
//! `value`, `version`, `created_ms`, `lifespan_ms`, `max_idle_ms`, `last_used_ms`,
//! `expires_at_ms`, `flags` (client flags, the 32 bits as a signed `integer`; 0 = none) and
//! `form` (0: `value` is the value's bytes; 1: it is a Redis structure's encoding,
//! `weft_core::Structure::encode`), with an index on `segment`. A table created by an older
//! Weft gains `flags` and `form` when a writable store opens it; a read-only store reads such
//! a table as plain bytes without flags.
//!
//! This crate owns nothing but that table: it never decides what a cache holds, and never
//! blocks a caller on a runtime of the caller's own (callers may be tokio worker threads).
//! Connections are plain TCP or Unix sockets (no TLS).

mod queue;
mod store;
mod table;

pub use store::{
    BATCH_BYTES_MAX, BATCH_CHANGES_MAX, FAILED_BATCHES_MAX, PENDING_CHANGES_MAX, PgStore,
};
pub use table::default_table_name;
