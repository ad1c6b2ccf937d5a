//! A cache's table: its validated name and every SQL statement the store runs on it.
//!
//! Identifiers cannot be bound as parameters, so they are validated (letters, digits and
//! underscores, at most 63 bytes, optionally `schema.table`) and always quoted; nothing else
//! is ever spliced into SQL.

use weft_store::StoreError;

/// PostgreSQL's identifier length limit (NAMEDATALEN - 1).
const IDENTIFIER_BYTES_MAX: usize = 63;

/// Columns read back into an entry, in the order `entry_from_row` expects.
const ENTRY_COLUMNS: &str =
    "key, value, version, created_ms, lifespan_ms, max_idle_ms, last_used_ms, flags, form";
/// The same for a table an older Weft created, without `flags` and `form`: every row holds
/// plain bytes without client flags.
const LEGACY_ENTRY_COLUMNS: &str = "key, value, version, created_ms, lifespan_ms, max_idle_ms, \
     last_used_ms, 0::integer AS flags, 0::smallint AS form";

/// `form` of a row whose `value` is the value's bytes.
pub(crate) const FORM_PLAIN: i16 = 0;
/// `form` of a row whose `value` is a structure's encoding (`weft_core::Structure::encode`).
pub(crate) const FORM_STRUCTURE: i16 = 1;

/// The table of one cache and the statements on it.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    /// The name as configured or derived, unquoted (for messages).
    pub(crate) name: String,
    pub(crate) create_table: String,
    /// Adds the columns a table created by an older Weft lacks (`flags`, `form`).
    pub(crate) add_columns: String,
    /// Fails with `undefined_column` on a table that lacks them (a read-only store, which
    /// may not add them, then reads it with [`Table::legacy`]'s statements).
    pub(crate) probe_columns: String,
    pub(crate) create_index: String,
    pub(crate) drop: String,
    /// Serializes concurrent creation by several nodes: `pg_advisory_xact_lock(hashtext($1))`.
    pub(crate) lock_for_creation: &'static str,
    pub(crate) load: String,
    pub(crate) upsert: String,
    pub(crate) delete_keys: String,
    pub(crate) delete_segments: String,
    pub(crate) truncate: String,
    pub(crate) purge: String,
    pub(crate) publish: String,
    pub(crate) publish_keys: String,
    pub(crate) count: String,
    pub(crate) count_segments: String,
    pub(crate) max_version: String,
    /// The quoted name, as spliced into the statements.
    quoted: String,
}

fn is_identifier(part: &str) -> bool {
    let mut chars = part.chars();
    part.len() <= IDENTIFIER_BYTES_MAX
        && chars
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `weft_` plus the cache name with every character but ASCII letters, digits and `_`
/// replaced by `_`, lowercased, cut to 63 bytes.
#[must_use]
pub fn default_table_name(cache_name: &str) -> String {
    let mut name: String = "weft_".to_owned();
    name.extend(cache_name.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else {
            '_'
        }
    }));
    name.truncate(IDENTIFIER_BYTES_MAX);
    name
}

impl Table {
    /// The table of `cache_name`: `configured` if given (validated), else
    /// [`default_table_name`].
    ///
    /// # Errors
    /// If `configured` is not `table` or `schema.table` made of letters, digits and
    /// underscores, each part at most 63 bytes and not starting with a digit.
    pub(crate) fn new(cache_name: &str, configured: Option<&str>) -> Result<Self, StoreError> {
        let name = match configured {
            Some(name) => name.to_owned(),
            None => default_table_name(cache_name),
        };
        let parts: Vec<&str> = name.split('.').collect();
        if parts.len() > 2 || !parts.iter().all(|part| is_identifier(part)) {
            return Err(StoreError::io(
                format!("use PostgreSQL table {name:?} for cache {cache_name:?}"),
                "a table name is `table` or `schema.table`, each of letters, digits and \
                 underscores, at most 63 bytes, not starting with a digit",
            ));
        }
        let quoted = parts
            .iter()
            .map(|part| format!("\"{part}\""))
            .collect::<Vec<_>>()
            .join(".");
        let table_part = parts.last().copied().unwrap_or_default();
        let mut index = table_part.to_owned();
        index.truncate(IDENTIFIER_BYTES_MAX - "_segment".len());
        index.push_str("_segment");
        let t = quoted.as_str();
        Ok(Self {
            name,
            create_table: format!(
                "CREATE TABLE IF NOT EXISTS {t} (\
                 key bytea PRIMARY KEY, \
                 segment integer NOT NULL, \
                 value bytea NOT NULL, \
                 version bigint NOT NULL, \
                 created_ms bigint NULL, \
                 lifespan_ms bigint NULL, \
                 max_idle_ms bigint NULL, \
                 last_used_ms bigint NOT NULL, \
                 expires_at_ms bigint NULL, \
                 flags integer NOT NULL DEFAULT 0, \
                 form smallint NOT NULL DEFAULT 0)"
            ),
            add_columns: format!(
                "ALTER TABLE {t} \
                 ADD COLUMN IF NOT EXISTS flags integer NOT NULL DEFAULT 0, \
                 ADD COLUMN IF NOT EXISTS form smallint NOT NULL DEFAULT 0"
            ),
            probe_columns: format!("SELECT flags, form FROM {t} WHERE false"),
            create_index: format!("CREATE INDEX IF NOT EXISTS \"{index}\" ON {t} (segment)"),
            drop: format!("DROP TABLE IF EXISTS {t}"),
            lock_for_creation: "SELECT pg_advisory_xact_lock(hashtext($1))",
            load: load_sql(t, ENTRY_COLUMNS),
            upsert: format!(
                "INSERT INTO {t} \
                 (key, segment, value, version, created_ms, lifespan_ms, max_idle_ms, \
                 last_used_ms, expires_at_ms, flags, form) \
                 SELECT * FROM UNNEST($1::bytea[], $2::integer[], $3::bytea[], $4::bigint[], \
                 $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[], \
                 $10::integer[], $11::smallint[]) \
                 ON CONFLICT (key) DO UPDATE SET \
                 segment = EXCLUDED.segment, value = EXCLUDED.value, \
                 version = EXCLUDED.version, created_ms = EXCLUDED.created_ms, \
                 lifespan_ms = EXCLUDED.lifespan_ms, max_idle_ms = EXCLUDED.max_idle_ms, \
                 last_used_ms = EXCLUDED.last_used_ms, expires_at_ms = EXCLUDED.expires_at_ms, \
                 flags = EXCLUDED.flags, form = EXCLUDED.form"
            ),
            delete_keys: format!("DELETE FROM {t} WHERE key = ANY($1::bytea[])"),
            delete_segments: format!("DELETE FROM {t} WHERE segment = ANY($1::integer[])"),
            truncate: format!("TRUNCATE {t}"),
            purge: format!("DELETE FROM {t} WHERE expires_at_ms <= $1"),
            publish: publish_sql(t, ENTRY_COLUMNS),
            publish_keys: format!(
                "SELECT key FROM {t} \
                 WHERE segment = ANY($1::integer[]) \
                 AND (expires_at_ms IS NULL OR expires_at_ms > $2)"
            ),
            count: format!("SELECT count(*) FROM {t}"),
            count_segments: format!("SELECT count(*) FROM {t} WHERE segment = ANY($1::integer[])"),
            max_version: format!("SELECT coalesce(max(version), 0) FROM {t}"),
            quoted,
        })
    }

    /// The same table's statements for a table an older Weft created, which lacks `flags`
    /// and `form`: reads take every row as plain bytes without client flags. Only for a
    /// read-only store (a writable one adds the columns).
    pub(crate) fn legacy(&self) -> Self {
        Self {
            load: load_sql(&self.quoted, LEGACY_ENTRY_COLUMNS),
            publish: publish_sql(&self.quoted, LEGACY_ENTRY_COLUMNS),
            ..self.clone()
        }
    }
}

/// Reads one key's live row.
fn load_sql(table: &str, columns: &str) -> String {
    format!(
        "SELECT {columns} FROM {table} \
         WHERE key = $1 AND (expires_at_ms IS NULL OR expires_at_ms > $2)"
    )
}

/// Reads the live rows of the segments `$1`.
fn publish_sql(table: &str, columns: &str) -> String {
    format!(
        "SELECT {columns} FROM {table} \
         WHERE segment = ANY($1::integer[]) \
         AND (expires_at_ms IS NULL OR expires_at_ms > $2)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cache names become safe default table names.
    #[test]
    fn default_names_are_sanitized() {
        assert_eq!(default_table_name("users"), "weft_users");
        assert_eq!(default_table_name("My-Cache.v2"), "weft_my_cache_v2");
        assert_eq!(
            default_table_name("x\"; DROP TABLE y"),
            "weft_x___drop_table_y"
        );
        assert_eq!(default_table_name("é"), "weft__");
        assert_eq!(default_table_name(&"a".repeat(100)).len(), 63);
        assert!(Table::new(&"a".repeat(100), None).is_ok());
    }

    /// Configured names are validated, quoted, and never spliced unchecked.
    #[test]
    fn configured_names_are_validated_and_quoted() {
        let table = Table::new("c", Some("store.entries")).expect("valid");
        assert!(table.create_table.contains("\"store\".\"entries\""));
        assert!(
            table
                .create_index
                .starts_with("CREATE INDEX IF NOT EXISTS \"entries_segment\"")
        );
        for bad in [
            "",
            "a.b.c",
            "1abc",
            "a b",
            "a\"b",
            "a;b",
            ".a",
            "a.",
            &"a".repeat(64),
        ] {
            assert!(
                matches!(Table::new("c", Some(bad)), Err(StoreError::Io { .. })),
                "{bad:?} accepted"
            );
        }
    }
}
