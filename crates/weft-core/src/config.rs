//! The configuration model: what a cache is made of. The server reads it from one TOML file;
//! embedded users build the same structures in code (`CacheConfig::default()` and field
//! updates). Every value is validated while it is deserialized, so an error names the exact
//! place in the file (see [`ConfigError`]). `docs/configuration.md` documents each option.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// Largest segment count accepted; Infinispan's clients handle up to this many comfortably.
pub const SEGMENT_COUNT_MAX: u32 = 16_384;
/// The default number of segments, as in Infinispan.
pub const SEGMENT_COUNT_DEFAULT: u32 = 256;
/// How often expired entries are purged unless configured (Infinispan's default too).
pub const REAPER_INTERVAL_DEFAULT: Duration = Duration::from_secs(1);

/// A configuration that failed to parse or validate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
#[error("{source_name}:{line}:{column}: {reason}")]
pub struct ConfigError {
    /// The file name (or `<json>`, `<toml>` for inline text).
    pub source_name: String,
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// 1-based column, 0 when unknown.
    pub column: usize,
    /// What is wrong, in words.
    pub reason: String,
}

impl ConfigError {
    fn at_offset(source_name: &str, text: &str, offset: Option<usize>, reason: String) -> Self {
        let (line, column) = offset.map_or((0, 0), |offset| line_and_column(text, offset));
        Self {
            source_name: source_name.to_owned(),
            line,
            column,
            reason,
        }
    }
}

fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit('\n')
        .next()
        .map_or(0, |tail| tail.chars().count())
        + 1;
    (line, column)
}

/// Parses TOML text into `T`, attributing errors to `source_name`.
///
/// # Errors
/// A [`ConfigError`] with the line, column and reason of the first problem.
pub fn from_toml<T: for<'de> Deserialize<'de>>(
    source_name: &str,
    text: &str,
) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|error| {
        let reason = error.message().trim().to_owned();
        ConfigError::at_offset(
            source_name,
            text,
            error.span().map(|span| span.start),
            reason,
        )
    })
}

/// Parses JSON text into `T`, attributing errors to `source_name`.
///
/// # Errors
/// A [`ConfigError`] with the line, column and reason of the first problem.
pub fn from_json<T: for<'de> Deserialize<'de>>(
    source_name: &str,
    text: &str,
) -> Result<T, ConfigError> {
    serde_json::from_str(text).map_err(|error| {
        let reason = error.to_string();
        let reason = reason
            .split(" at line ")
            .next()
            .unwrap_or(&reason)
            .to_owned();
        ConfigError {
            source_name: source_name.to_owned(),
            line: error.line(),
            column: error.column(),
            reason,
        }
    })
}

/// How a cache's data is placed across nodes. On a server that is not clustered, a
/// distributed or replicated cache behaves as a cluster of one (as in Infinispan).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CacheMode {
    /// Data lives on this node only.
    #[default]
    Local,
    /// Each segment has `owners` copies: a primary and backups.
    Distributed,
    /// Every node holds every entry.
    Replicated,
}

impl CacheMode {
    /// Whether the cache spans the cluster.
    #[must_use]
    pub fn is_clustered(self) -> bool {
        self != Self::Local
    }
}

impl<'de> Deserialize<'de> for CacheMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_lowercase().as_str() {
            "local" => Ok(Self::Local),
            "distributed" | "dist" => Ok(Self::Distributed),
            "replicated" | "repl" => Ok(Self::Replicated),
            "invalidation" => Err(de::Error::custom(
                "cache mode `invalidation` is not supported; use `distributed` or `replicated`",
            )),
            _ => Err(de::Error::custom(format!(
                "unknown cache mode `{text}`, expected `local`, `distributed` or `replicated`"
            ))),
        }
    }
}

/// When a clustered cache's write is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Replication {
    /// After every live backup owner applied it.
    #[default]
    Sync,
    /// Once the primary owner applied it; backups catch up in the background.
    Async,
}

impl<'de> Deserialize<'de> for Replication {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_lowercase().as_str() {
            "sync" => Ok(Self::Sync),
            "async" => Ok(Self::Async),
            _ => Err(de::Error::custom(format!(
                "unknown replication `{text}`, expected `sync` or `async`"
            ))),
        }
    }
}

/// Which member answers a read of a distributed cache's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reads {
    /// The key's primary owner, once the writes it may have seen are on every owner: reads
    /// are linearizable.
    #[default]
    Primary,
    /// The member the read arrives at, if it owns the key (primary or backup); otherwise
    /// the primary. Reads through every owner add read capacity; what they give up: while
    /// a write is in flight, a read at its primary may see the new value and a later read
    /// at a backup the old one. A read that starts after a synchronous write was
    /// acknowledged sees it on any owner (every owner applied it first).
    AnyOwner,
}

impl<'de> Deserialize<'de> for Reads {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_lowercase().as_str() {
            "primary" => Ok(Self::Primary),
            "any-owner" => Ok(Self::AnyOwner),
            _ => Err(de::Error::custom(format!(
                "unknown reads `{text}`, expected `primary` or `any-owner`"
            ))),
        }
    }
}

impl Reads {
    fn is_primary(&self) -> bool {
        *self == Self::Primary
    }
}

/// What a clustered cache allows while it is DEGRADED (it lost the majority of its members,
/// or every owner of some segment).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WhenSplit {
    /// Refuse reads and writes (consistency first).
    #[default]
    DenyReadWrites,
    /// Serve reads of what this side holds; refuse writes.
    AllowReads,
    /// Serve both (availability first): the sides may diverge, reconciled on merge.
    AllowReadWrites,
}

/// How entries that differ between partitions are reconciled when they merge: the
/// preferred partition is the one that kept the cluster (the majority).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MergePolicy {
    /// No reconciliation: what a returning node holds stays where it does not conflict
    /// with a newer version.
    None,
    /// The preferred partition's entry (or its absence) wins.
    #[default]
    PreferredAlways,
    /// The preferred partition's entry wins; where it has none, the other side's is kept.
    PreferredNonNull,
    /// Entries that differ are removed.
    RemoveAll,
}

impl<'de> Deserialize<'de> for WhenSplit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_uppercase().replace('-', "_").as_str() {
            "DENY_READ_WRITES" => Ok(Self::DenyReadWrites),
            "ALLOW_READS" => Ok(Self::AllowReads),
            "ALLOW_READ_WRITES" => Ok(Self::AllowReadWrites),
            _ => Err(de::Error::custom(format!(
                "unknown when-split `{text}`, expected DENY_READ_WRITES, ALLOW_READS or ALLOW_READ_WRITES"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for MergePolicy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_uppercase().replace('-', "_").as_str() {
            "NONE" => Ok(Self::None),
            "PREFERRED_ALWAYS" => Ok(Self::PreferredAlways),
            "PREFERRED_NON_NULL" => Ok(Self::PreferredNonNull),
            "REMOVE_ALL" => Ok(Self::RemoveAll),
            _ => Err(de::Error::custom(format!(
                "unknown merge-policy `{text}`, expected NONE, PREFERRED_ALWAYS, PREFERRED_NON_NULL or REMOVE_ALL"
            ))),
        }
    }
}

/// A clustered cache's behaviour in a network partition (Infinispan's
/// `partition-handling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct PartitionHandling {
    /// What a DEGRADED cache allows.
    pub when_split: WhenSplit,
    /// How diverged entries are reconciled on merge.
    pub merge_policy: MergePolicy,
}

/// How a cache maps keys to segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyPartitioner {
    /// Infinispan's MurmurHash3 ranges: what Hot Rod clients compute to reach a key's owner.
    #[default]
    HotRod,
    /// Redis Cluster's CRC16 slots, each segment a run of slots (the segment count must be a
    /// power of two up to 16384): what Redis cluster clients compute (CLUSTER SLOTS).
    RedisSlots,
}

impl<'de> Deserialize<'de> for KeyPartitioner {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_lowercase().as_str() {
            "hot-rod" | "hotrod" => Ok(Self::HotRod),
            "redis-slots" => Ok(Self::RedisSlots),
            _ => Err(de::Error::custom(format!(
                "unknown key-partitioner `{text}`, expected `hot-rod` or `redis-slots`"
            ))),
        }
    }
}

impl KeyPartitioner {
    /// The segment of `key` among `segments`.
    #[must_use]
    pub fn segment_of(self, key: &[u8], segments: u32) -> u32 {
        match self {
            Self::HotRod => crate::hash::segment_of(key, segments),
            Self::RedisSlots => crate::hash::slot_segment_of(key, segments),
        }
    }
}

/// Copies per segment of a distributed cache, by default.
pub const OWNERS_DEFAULT: u32 = 2;

/// What a bounded cache does when a write would exceed its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum WhenFull {
    /// Evict the least valuable entries (frequency-aware) to make room.
    #[default]
    Remove,
    /// Refuse writes that add entries while the cache is full.
    Exception,
}

impl<'de> Deserialize<'de> for WhenFull {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        match text.to_ascii_lowercase().as_str() {
            "remove" => Ok(Self::Remove),
            "exception" => Ok(Self::Exception),
            _ => Err(de::Error::custom(format!(
                "unknown when-full policy `{text}`, expected `remove` or `exception`"
            ))),
        }
    }
}

/// Expiration defaults of a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct ExpirationConfig {
    /// Lifespan given to entries written without one; absent = immortal.
    #[serde(
        deserialize_with = "optional_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub lifespan: Option<Duration>,
    /// Max idle given to entries written without one; absent = none.
    #[serde(
        deserialize_with = "optional_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub max_idle: Option<Duration>,
    /// How often the background reaper purges expired entries.
    #[serde(
        deserialize_with = "positive_duration",
        serialize_with = "ser_duration"
    )]
    pub interval: Duration,
}

impl Default for ExpirationConfig {
    fn default() -> Self {
        Self {
            lifespan: None,
            max_idle: None,
            interval: REAPER_INTERVAL_DEFAULT,
        }
    }
}

/// Memory bounds of a cache. At most one of `max_count` and `max_size` may be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(try_from = "RawMemoryConfig")]
pub struct MemoryConfig {
    /// Largest number of entries.
    pub max_count: Option<u64>,
    /// Largest memory footprint in bytes (entries' allocations plus index overhead).
    pub max_size_bytes: Option<u64>,
    /// What happens at the bound.
    pub when_full: WhenFull,
}

impl MemoryConfig {
    /// True when either bound is set.
    #[must_use]
    pub fn is_bounded(&self) -> bool {
        self.max_count.is_some() || self.max_size_bytes.is_some()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawMemoryConfig {
    #[serde(default, deserialize_with = "optional_count")]
    max_count: Option<u64>,
    #[serde(default, deserialize_with = "optional_size")]
    max_size: Option<u64>,
    #[serde(default)]
    when_full: WhenFull,
}

impl TryFrom<RawMemoryConfig> for MemoryConfig {
    type Error = String;

    fn try_from(raw: RawMemoryConfig) -> Result<Self, Self::Error> {
        if raw.max_count.is_some() && raw.max_size.is_some() {
            return Err("set either `max-count` or `max-size`, not both".to_owned());
        }
        Ok(Self {
            max_count: raw.max_count,
            max_size_bytes: raw.max_size,
            when_full: raw.when_full,
        })
    }
}

/// Everything that defines one cache.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct CacheConfig {
    /// Placement across nodes.
    pub mode: CacheMode,
    /// Copies of each segment in a distributed cache (primary included).
    #[serde(deserialize_with = "owner_count")]
    pub owners: u32,
    /// When a clustered cache's writes are acknowledged.
    pub replication: Replication,
    /// Which member answers a distributed cache's reads (a replicated cache's are answered
    /// by any member holding the key).
    #[serde(skip_serializing_if = "Reads::is_primary")]
    pub reads: Reads,
    /// Behaviour in a network partition.
    pub partition_handling: PartitionHandling,
    /// How keys map to segments.
    pub key_partitioner: KeyPartitioner,
    /// Number of segments the key space is divided into.
    #[serde(deserialize_with = "segment_count")]
    pub segments: u32,
    /// Whether statistics are collected.
    pub statistics: bool,
    /// Expiration defaults.
    pub expiration: ExpirationConfig,
    /// Memory bounds and eviction.
    #[serde(serialize_with = "ser_memory")]
    pub memory: MemoryConfig,
    /// The RESP database number (`SELECT n`) that addresses this cache.
    pub resp_database: Option<u32>,
    /// Media types of keys and values, as Infinispan declares them.
    pub encoding: EncodingConfig,
    /// Stores behind the cache; none by default (memory only).
    #[serde(skip_serializing_if = "PersistenceConfig::is_empty")]
    pub persistence: PersistenceConfig,
    /// Who may touch the cache when the server authorizes requests (Infinispan's
    /// `security.authorization`).
    #[serde(skip_serializing_if = "SecurityConfig::is_default")]
    pub security: SecurityConfig,
}

/// A cache's security (Infinispan's `security` element).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct SecurityConfig {
    /// Which roles may touch the cache.
    pub authorization: AuthorizationConfig,
}

impl SecurityConfig {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Which roles may touch a cache (Infinispan's `authorization` element). A server that
/// authorizes requests checks every cache's: by default every role may, each as far as its
/// permissions go.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct AuthorizationConfig {
    /// Whether requests to this cache are authorized at all (when the server authorizes).
    /// `false` lets every authenticated user do anything to it, as an Infinispan cache
    /// without authorization.
    pub enabled: bool,
    /// The only roles that may touch the cache (each as far as its permissions go); empty:
    /// every role.
    pub roles: Vec<String>,
}

impl Default for AuthorizationConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            roles: Vec::new(),
        }
    }
}

impl AuthorizationConfig {
    /// The roles admitted: `None` for every role.
    #[must_use]
    pub fn admitted(&self) -> Option<&[String]> {
        (!self.roles.is_empty()).then_some(self.roles.as_slice())
    }
}

/// The stores behind a cache (Infinispan's `persistence` element).
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct PersistenceConfig {
    /// Entries reach the stores only when evicted from memory (and on shutdown); removals
    /// still delete from the stores at once.
    pub passivation: bool,
    /// The chain of stores: writes go to each, reads try them in order.
    #[serde(rename = "store", skip_serializing_if = "Vec::is_empty")]
    pub stores: Vec<StoreConfig>,
}

impl PersistenceConfig {
    /// True when the cache has no store.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.stores.is_empty()
    }
}

/// Which store implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StoreKind {
    /// The log-structured file store (`weft-store`).
    #[default]
    File,
    /// A PostgreSQL table (`weft-store-pg`).
    Postgres,
}

/// When a write is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DurabilityMode {
    /// A write returns only after the store has synced it to disk; concurrent writers share
    /// syncs (group commit).
    #[default]
    Sync,
    /// Writes are synced every `sync-interval`; a crash loses at most that much.
    Periodic,
    /// Writes reach the operating system at once and disk when it decides.
    None,
}

/// Write-behind: changes are queued (coalesced per key) and written in batches by a
/// background thread; the write returns before the store has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct WriteBehindConfig {
    /// Most changes queued; writers wait while it is full.
    pub modification_queue_size: usize,
    /// Most changes written to the store in one batch.
    pub batch_size: usize,
}

impl Default for WriteBehindConfig {
    fn default() -> Self {
        Self {
            modification_queue_size: 16_384,
            batch_size: 512,
        }
    }
}

/// One store of a cache's chain.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct StoreConfig {
    /// The implementation.
    #[serde(rename = "type")]
    pub kind: StoreKind,
    /// Load every stored entry into memory when the cache starts.
    pub preload: bool,
    /// Delete the store's contents when the cache starts.
    pub purge_on_startup: bool,
    /// The store is shared by every node of a cluster (each node then writes only what it
    /// owns as primary).
    pub shared: bool,
    /// Never write to the store.
    pub read_only: bool,
    /// When writes are durable (file store).
    pub durability: DurabilityMode,
    /// The sync interval of `durability = "periodic"`.
    #[serde(
        deserialize_with = "positive_duration",
        serialize_with = "ser_duration"
    )]
    pub sync_interval: Duration,
    /// Directory of the file store; relative paths are under the server's data directory.
    /// Defaults to the cache's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Largest data file before a new one is started.
    #[serde(deserialize_with = "size", serialize_with = "ser_size")]
    pub file_size_max: u64,
    /// A data file is compacted when its live bytes fall under this percentage.
    pub compaction_threshold_percent: u8,
    /// Write-behind instead of write-through, when present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_behind: Option<WriteBehindConfig>,
    /// PostgreSQL connection string (`postgres://user:password@host:port/db` or key=value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_url: Option<String>,
    /// PostgreSQL table; defaults to `weft_` plus the cache name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// Connections in the PostgreSQL pool.
    pub pool_size: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            kind: StoreKind::File,
            preload: true,
            purge_on_startup: false,
            shared: false,
            read_only: false,
            durability: DurabilityMode::Sync,
            sync_interval: Duration::from_secs(1),
            path: None,
            file_size_max: 64 << 20,
            compaction_threshold_percent: 50,
            write_behind: None,
            connection_url: None,
            table: None,
            pool_size: 4,
        }
    }
}

/// The media type of one side (keys or values): `{ media-type = "text/plain" }`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MediaTypeConfig {
    /// A MIME type such as `application/x-protostream` or `text/plain; charset=UTF-8`.
    #[serde(deserialize_with = "media_type")]
    pub media_type: String,
}

/// Declared media types of a cache's keys and values (Infinispan's `encoding` element).
///
/// Entries are stored as the bytes clients send whatever is declared here; the declaration
/// is kept so that configurations written for Infinispan load unchanged, and so that the
/// Hot Rod endpoint can convert between media types.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct EncodingConfig {
    /// One media type for both keys and values.
    #[serde(
        deserialize_with = "optional_media_type",
        skip_serializing_if = "Option::is_none"
    )]
    pub media_type: Option<String>,
    /// The keys' media type, overriding `media-type`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<MediaTypeConfig>,
    /// The values' media type, overriding `media-type`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<MediaTypeConfig>,
}

impl EncodingConfig {
    /// The declared media type of keys, if any.
    #[must_use]
    pub fn key_media_type(&self) -> Option<&str> {
        self.key
            .as_ref()
            .map(|k| k.media_type.as_str())
            .or(self.media_type.as_deref())
    }

    /// The declared media type of values, if any.
    #[must_use]
    pub fn value_media_type(&self) -> Option<&str> {
        self.value
            .as_ref()
            .map(|v| v.media_type.as_str())
            .or(self.media_type.as_deref())
    }
}

/// Accepts `type/subtype` with optional `; parameters`, as a MIME type is written.
fn check_media_type(text: &str) -> Result<(), String> {
    let essence = text.split(';').next().unwrap_or_default().trim();
    let valid_token = |token: &str| {
        !token.is_empty()
            && token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c))
    };
    match essence.split_once('/') {
        Some((kind, subtype)) if valid_token(kind) && valid_token(subtype) => Ok(()),
        _ => Err(format!(
            "invalid media type `{text}`: expected e.g. `text/plain` or `application/x-protostream`"
        )),
    }
}

fn media_type<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let text = String::deserialize(d)?;
    check_media_type(&text).map_err(de::Error::custom)?;
    Ok(text)
}

fn optional_media_type<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    media_type(d).map(Some)
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            mode: CacheMode::Local,
            owners: OWNERS_DEFAULT,
            replication: Replication::Sync,
            reads: Reads::Primary,
            partition_handling: PartitionHandling::default(),
            key_partitioner: KeyPartitioner::HotRod,
            segments: SEGMENT_COUNT_DEFAULT,
            statistics: true,
            expiration: ExpirationConfig::default(),
            memory: MemoryConfig::default(),
            resp_database: None,
            encoding: EncodingConfig::default(),
            persistence: PersistenceConfig::default(),
            security: SecurityConfig::default(),
        }
    }
}

impl CacheConfig {
    /// How keys are stored: the declared key media type, else `application/octet-stream`
    /// for a cache serving a RESP database (Redis data is raw bytes, as Infinispan's
    /// `respCache`), else `application/x-protostream` (Infinispan's recommended default).
    #[must_use]
    pub fn key_format(&self) -> crate::media::Format {
        self.encoding.key_media_type().map_or_else(
            || self.default_format(),
            crate::media::Format::from_media_type,
        )
    }

    /// How values are stored; as [`CacheConfig::key_format`].
    #[must_use]
    pub fn value_format(&self) -> crate::media::Format {
        self.encoding.value_media_type().map_or_else(
            || self.default_format(),
            crate::media::Format::from_media_type,
        )
    }

    fn default_format(&self) -> crate::media::Format {
        if self.resp_database.is_some() {
            crate::media::Format::Octet
        } else {
            crate::media::Format::Protostream
        }
    }

    /// Parses a cache configuration from TOML.
    ///
    /// # Errors
    /// The first problem, with its line and column.
    pub fn from_toml(source_name: &str, text: &str) -> Result<Self, ConfigError> {
        from_toml(source_name, text)
    }

    /// Parses a cache configuration from JSON: either this crate's own shape
    /// (`{"segments": 64, "memory": {"max-count": 10}}`) or Infinispan's wrapper
    /// (`{"local-cache": {...}}`), whose common attributes share the same names.
    ///
    /// # Errors
    /// The first problem, with its line and column.
    pub fn from_json(source_name: &str, text: &str) -> Result<Self, ConfigError> {
        let trimmed = text.trim_start();
        let wrapped = if trimmed.starts_with('{') {
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
                .ok()
                .filter(|map| map.len() == 1 && map.keys().all(|k| k.ends_with("-cache")))
        } else {
            None
        };
        if let Some(map) = wrapped {
            // Line and column errors come from the text itself.
            let _: serde_json::Map<String, serde_json::Value> = from_json(source_name, text)?;
            let Some((kind, inner)) = map.into_iter().next() else {
                return from_json(source_name, text);
            };
            let mode = match kind.as_str() {
                "local-cache" => "local",
                "distributed-cache" => "distributed",
                "replicated-cache" => "replicated",
                _ => {
                    return Err(ConfigError {
                        source_name: source_name.to_owned(),
                        line: 1,
                        column: 1,
                        reason: format!(
                            "`{kind}` is not supported; use `local-cache`, `distributed-cache` or `replicated-cache`"
                        ),
                    });
                }
            };
            let mut inner = match inner {
                serde_json::Value::Object(inner) => inner,
                other => {
                    return Err(ConfigError {
                        source_name: source_name.to_owned(),
                        line: 1,
                        column: 1,
                        reason: format!("`{kind}` must be an object, not {other}"),
                    });
                }
            };
            // Infinispan's `mode` says SYNC or ASYNC; Weft's says where data lives.
            let infinispan_mode = inner
                .get("mode")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|mode| {
                    mode.eq_ignore_ascii_case("sync") || mode.eq_ignore_ascii_case("async")
                });
            if infinispan_mode && let Some(sync) = inner.remove("mode") {
                inner.insert("replication".to_owned(), sync);
            }
            if mode != "local" {
                inner.insert("mode".to_owned(), serde_json::Value::from(mode));
            }
            let inner = serde_json::Value::Object(inner).to_string();
            return from_json(source_name, &inner);
        }
        from_json(source_name, text)
    }
}

/// The Infinispan cache templates Weft provides (`org.infinispan.*`, what Hot Rod's
/// `DefaultTemplate` and REST's `?template=` name), as [`template`] maps them.
pub const TEMPLATES: [&str; 5] = [
    "org.infinispan.LOCAL",
    "org.infinispan.REPL_SYNC",
    "org.infinispan.REPL_ASYNC",
    "org.infinispan.DIST_SYNC",
    "org.infinispan.DIST_ASYNC",
];

/// Templates Infinispan defines that Weft refuses by name rather than as unknown: it has no
/// invalidation caches, and no transactions.
const TEMPLATES_UNSUPPORTED: [&str; 4] = [
    "org.infinispan.INVALIDATION_SYNC",
    "org.infinispan.INVALIDATION_ASYNC",
    "org.infinispan.REPL_SYNC_TX",
    "org.infinispan.DIST_SYNC_TX",
];

/// Why a template name gives no configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// No template has this name (Infinispan's wording, which clients match on).
    #[error(
        "ISPN000436: Cache '{0}' has been requested, but no matching cache configuration exists"
    )]
    Unknown(String),
    /// Infinispan defines it, but it makes a kind of cache Weft does not have.
    #[error(
        "template '{0}' makes a cache Weft does not support (invalidation or transactional); \
         use org.infinispan.DIST_SYNC, org.infinispan.REPL_SYNC or org.infinispan.LOCAL"
    )]
    Unsupported(String),
}

/// The configuration Infinispan's template `name` gives a cache: its mode (local,
/// distributed or replicated) and, for clustered ones, whether writes are acknowledged
/// synchronously; everything else is [`CacheConfig::default`] (statistics on, as in
/// Infinispan's templates). See [`TEMPLATES`].
///
/// # Errors
/// [`TemplateError::Unsupported`] for Infinispan's invalidation and transactional templates,
/// [`TemplateError::Unknown`] for any other name.
pub fn template(name: &str) -> Result<CacheConfig, TemplateError> {
    let (mode, replication) = match name.strip_prefix("org.infinispan.") {
        Some("LOCAL") => (CacheMode::Local, Replication::Sync),
        Some("REPL_SYNC") => (CacheMode::Replicated, Replication::Sync),
        Some("REPL_ASYNC") => (CacheMode::Replicated, Replication::Async),
        Some("DIST_SYNC") => (CacheMode::Distributed, Replication::Sync),
        Some("DIST_ASYNC") => (CacheMode::Distributed, Replication::Async),
        _ if TEMPLATES_UNSUPPORTED.contains(&name) => {
            return Err(TemplateError::Unsupported(name.to_owned()));
        }
        _ => return Err(TemplateError::Unknown(name.to_owned())),
    };
    Ok(CacheConfig {
        mode,
        replication,
        statistics: true,
        ..CacheConfig::default()
    })
}

fn ser_duration<S: serde::Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
}

fn ser_opt_duration<S: serde::Serializer>(
    value: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(duration) => ser_duration(duration, serializer),
        None => serializer.serialize_none(),
    }
}

fn ser_memory<S: serde::Serializer>(
    value: &MemoryConfig,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(None)?;
    if let Some(count) = value.max_count {
        map.serialize_entry("max-count", &count)?;
    }
    if let Some(size) = value.max_size_bytes {
        map.serialize_entry("max-size", &size)?;
    }
    map.serialize_entry("when-full", &value.when_full)?;
    map.end()
}

/// Parses `"250ms"`, `"30s"`, `"5m"`, `"2h"`, `"1d"` or a bare number of milliseconds.
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let amount: u64 = number.parse().map_err(|_| {
        format!("invalid duration `{text}`: expected e.g. `500ms`, `30s`, `5m`, `2h`, `1d`")
    })?;
    let millis_per_unit: u64 = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => {
            return Err(format!(
                "invalid duration unit `{other}` in `{text}`: expected ms, s, m, h or d"
            ));
        }
    };
    amount
        .checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("duration `{text}` is too large"))
}

/// Parses `"64MiB"`, `"1GB"`, `"512KiB"` or a bare number of bytes.
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let amount: u64 = number.parse().map_err(|_| {
        format!("invalid size `{text}`: expected e.g. `1048576`, `512KiB`, `64MiB`, `1GiB`")
    })?;
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "invalid size unit `{other}` in `{text}`: expected B, KB, MB, GB, KiB, MiB or GiB"
            ));
        }
    };
    amount
        .checked_mul(multiplier)
        .ok_or_else(|| format!("size `{text}` is too large"))
}

/// A number given either as a TOML/JSON integer or as a string (Infinispan's JSON quotes them),
/// or a JSON `null` (how an absent optional value serializes) meaning "not set".
enum NumberOrText {
    Number(i64),
    Text(String),
    Null,
}

impl<'de> Deserialize<'de> for NumberOrText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = NumberOrText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(NumberOrText::Number(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                i64::try_from(v)
                    .map(NumberOrText::Number)
                    .map_err(|_| E::custom("number is too large"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(NumberOrText::Text(v.to_owned()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(NumberOrText::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(NumberOrText::Null)
            }
        }
        deserializer.deserialize_any(V)
    }
}

fn optional_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    match NumberOrText::deserialize(d)? {
        // Infinispan writes -1 for "never"; accept it as absent.
        NumberOrText::Number(-1) | NumberOrText::Null => Ok(None),
        NumberOrText::Number(n) if n <= 0 => Err(de::Error::custom(format!(
            "duration must be positive, got {n}"
        ))),
        NumberOrText::Number(n) => Ok(Some(Duration::from_millis(n.unsigned_abs()))),
        NumberOrText::Text(text) if text.trim() == "-1" => Ok(None),
        NumberOrText::Text(text) => match parse_duration(&text).map_err(de::Error::custom)? {
            duration if duration.is_zero() => Err(de::Error::custom("duration must be positive")),
            duration => Ok(Some(duration)),
        },
    }
}

fn positive_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    optional_duration(d)?.ok_or_else(|| de::Error::custom("interval must be a positive duration"))
}

fn optional_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let value = match NumberOrText::deserialize(d)? {
        NumberOrText::Null => return Ok(None),
        NumberOrText::Number(n) => n,
        NumberOrText::Text(text) => text
            .trim()
            .parse()
            .map_err(|_| de::Error::custom(format!("invalid count `{text}`")))?,
    };
    match value {
        -1 => Ok(None),
        n if n <= 0 => Err(de::Error::custom(format!(
            "max-count must be positive, got {n}"
        ))),
        n => Ok(Some(n.unsigned_abs())),
    }
}

fn size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    optional_size(d)?.ok_or_else(|| de::Error::custom("a size is required here"))
}

fn ser_size<S: serde::Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(*value)
}

fn optional_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let value = match NumberOrText::deserialize(d)? {
        NumberOrText::Number(-1) | NumberOrText::Null => return Ok(None),
        NumberOrText::Number(n) if n <= 0 => {
            return Err(de::Error::custom(format!(
                "max-size must be positive, got {n}"
            )));
        }
        NumberOrText::Number(n) => n.unsigned_abs(),
        NumberOrText::Text(text) => parse_size(&text).map_err(de::Error::custom)?,
    };
    if value == 0 {
        return Err(de::Error::custom("max-size must be positive"));
    }
    Ok(Some(value))
}

/// An integer, or Infinispan's quoted form of one.
fn integer<'de, D: Deserializer<'de>>(d: D, what: &str) -> Result<i64, D::Error> {
    match NumberOrText::deserialize(d)? {
        NumberOrText::Null => Err(de::Error::custom(format!("{what} needs a number"))),
        NumberOrText::Number(n) => Ok(n),
        NumberOrText::Text(text) => text
            .trim()
            .parse()
            .map_err(|_| de::Error::custom(format!("invalid {what} `{text}`"))),
    }
}

fn owner_count<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let value = integer(d, "owners")?;
    match u32::try_from(value) {
        Ok(count) if (1..=u32::from(u8::MAX)).contains(&count) => Ok(count),
        _ => Err(de::Error::custom(format!(
            "owners must be between 1 and 255, got {value}"
        ))),
    }
}

fn segment_count<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let value = integer(d, "segments")?;
    match u32::try_from(value) {
        Ok(count) if (1..=SEGMENT_COUNT_MAX).contains(&count) => Ok(count),
        _ => Err(de::Error::custom(format!(
            "segments must be between 1 and {SEGMENT_COUNT_MAX}, got {value}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a full cache configuration parses with units.
    #[test]
    fn parses_everything() {
        let text = r#"
segments = 64
statistics = false
resp-database = 3
[expiration]
lifespan = "10m"
max-idle = 30000
interval = "5s"
[memory]
max-size = "64MiB"
when-full = "exception"
"#;
        let config = CacheConfig::from_toml("c.toml", text).unwrap_or_default();
        assert_eq!(config.segments, 64);
        assert!(!config.statistics);
        assert_eq!(config.resp_database, Some(3));
        assert_eq!(config.expiration.lifespan, Some(Duration::from_secs(600)));
        assert_eq!(config.expiration.max_idle, Some(Duration::from_secs(30)));
        assert_eq!(config.expiration.interval, Duration::from_secs(5));
        assert_eq!(config.memory.max_size_bytes, Some(64 << 20));
        assert_eq!(config.memory.when_full, WhenFull::Exception);
    }

    // Proves errors name the file, the line and the reason.
    #[test]
    fn errors_name_file_line_and_reason() {
        let cases = [
            ("segments = 64\nsegmnts = 3\n", 2, "unknown field `segmnts`"),
            ("segments = 0\n", 1, "segments must be between 1 and"),
            (
                "[expiration]\nlifespan = \"10 parsecs\"\n",
                2,
                "invalid duration unit",
            ),
            ("[memory]\nmax-count = 5\nmax-size = 10\n", 1, "not both"),
            ("mode = \"invalidation\"\n", 1, "not supported"),
            ("owners = 0\n", 1, "owners must be between 1 and 255"),
            (
                "[memory]\nwhen-full = \"panic\"\n",
                2,
                "unknown when-full policy",
            ),
            ("statistics = 3\n", 1, "invalid type"),
        ];
        for (text, line, reason) in cases {
            let error = CacheConfig::from_toml("weft.toml", text).err();
            let error = error.unwrap_or_else(|| panic!("accepted: {text}"));
            assert_eq!(error.source_name, "weft.toml");
            assert_eq!(error.line, line, "{error}");
            assert!(error.reason.contains(reason), "{error}");
            assert!(
                error.to_string().starts_with(&format!("weft.toml:{line}:")),
                "{error}"
            );
        }
    }

    // Proves Infinispan's encoding element is accepted in both its forms and media types checked.
    #[test]
    fn encoding_is_accepted_and_checked() {
        let text = r#"{"local-cache":{"encoding":{"media-type":"application/x-protostream"}}}"#;
        let config = CacheConfig::from_json("<json>", text).unwrap_or_default();
        assert_eq!(
            config.encoding.key_media_type(),
            Some("application/x-protostream")
        );
        assert_eq!(
            config.encoding.value_media_type(),
            Some("application/x-protostream")
        );
        let text = "[encoding]\nkey = { media-type = \"text/plain\" }\nvalue = { media-type = \"application/json\" }\n";
        let config = CacheConfig::from_toml("c.toml", text).unwrap_or_default();
        assert_eq!(config.encoding.key_media_type(), Some("text/plain"));
        assert_eq!(config.encoding.value_media_type(), Some("application/json"));
        let error = CacheConfig::from_toml("c.toml", "[encoding]\nmedia-type = \"plain\"\n").err();
        assert!(error.is_some_and(|e| e.line == 2 && e.reason.contains("invalid media type")));
    }

    // Proves each Infinispan template makes the cache it names, and that unsupported and
    // unknown names are refused with different errors rather than making a local cache.
    #[test]
    fn templates() {
        let made = |name: &str| template(name).map(|config| (config.mode, config.replication));
        assert_eq!(
            made("org.infinispan.LOCAL"),
            Ok((CacheMode::Local, Replication::Sync))
        );
        assert_eq!(
            made("org.infinispan.DIST_SYNC"),
            Ok((CacheMode::Distributed, Replication::Sync))
        );
        assert_eq!(
            made("org.infinispan.DIST_ASYNC"),
            Ok((CacheMode::Distributed, Replication::Async))
        );
        assert_eq!(
            made("org.infinispan.REPL_SYNC"),
            Ok((CacheMode::Replicated, Replication::Sync))
        );
        assert_eq!(
            made("org.infinispan.REPL_ASYNC"),
            Ok((CacheMode::Replicated, Replication::Async))
        );
        for name in TEMPLATES {
            assert!(template(name).is_ok(), "{name}");
        }
        let distributed = template("org.infinispan.DIST_SYNC").unwrap_or_default();
        assert_eq!(distributed.owners, OWNERS_DEFAULT);
        assert!(distributed.statistics);
        assert_eq!(
            made("org.infinispan.INVALIDATION_SYNC"),
            Err(TemplateError::Unsupported(
                "org.infinispan.INVALIDATION_SYNC".into()
            ))
        );
        for unknown in [
            "org.infinispan.SCATTERED_SYNC",
            "DIST_SYNC",
            "org.infinispan.dist_sync",
            "",
        ] {
            assert_eq!(made(unknown), Err(TemplateError::Unknown(unknown.into())));
        }
        assert!(
            TemplateError::Unknown("x".into())
                .to_string()
                .starts_with("ISPN000436: Cache 'x' has been requested")
        );
    }

    // Proves Infinispan's JSON wrapper with quoted numbers is understood, and clustered modes refused.
    #[test]
    fn infinispan_json() {
        let text = r#"{"local-cache":{"expiration":{"lifespan":"5000","max-idle":-1},"memory":{"max-count":"100","when-full":"REMOVE"},"statistics":true}}"#;
        let config = CacheConfig::from_json("<json>", text).unwrap_or_default();
        assert_eq!(config.expiration.lifespan, Some(Duration::from_secs(5)));
        assert_eq!(config.expiration.max_idle, None);
        assert_eq!(config.memory.max_count, Some(100));
        let plain = CacheConfig::from_json("<json>", r#"{"segments": 8}"#).unwrap_or_default();
        assert_eq!(plain.segments, 8);
        let text = r#"{"distributed-cache":{"mode":"ASYNC","owners":"3","segments":"64"}}"#;
        let config = CacheConfig::from_json("<json>", text).unwrap_or_default();
        assert_eq!(config.mode, CacheMode::Distributed);
        assert_eq!(config.replication, Replication::Async);
        assert_eq!((config.owners, config.segments), (3, 64));
        let error = CacheConfig::from_json("<json>", r#"{"invalidation-cache":{}}"#).err();
        assert!(error.is_some_and(|e| e.reason.contains("not supported")));
        let error = CacheConfig::from_json("<json>", "{\n\"segmentz\": 8}").err();
        assert!(error.is_some_and(|e| e.line == 2 && e.reason.contains("unknown field")));
    }
}
