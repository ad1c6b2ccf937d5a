//! Request headers with meaning for the cache: media types, expiration, content negotiation
//! and HTTP preconditions (ETags and dates). Every parser here takes untrusted text and
//! answers a value or a 400 naming the header and what was expected.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::header::{ACCEPT, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_UNMODIFIED_SINCE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use weft_core::{CacheEntry, EntryMetadata, Expiry, Format, Lifetime};

use crate::error::RestError;

/// Request and response header: the entry's lifespan in seconds.
pub(crate) const TIME_TO_LIVE: HeaderName = HeaderName::from_static("timetoliveseconds");
/// Request and response header: the entry's max idle time in seconds.
pub(crate) const MAX_IDLE: HeaderName = HeaderName::from_static("maxidletimeseconds");
/// Response header: when the entry was written, in ms since the epoch.
pub(crate) const CREATED: HeaderName = HeaderName::from_static("created");
/// Response header: when the entry was last read or written, in ms since the epoch.
pub(crate) const LAST_USED: HeaderName = HeaderName::from_static("lastused");
/// Request header: how the key in the URL is encoded.
pub(crate) const KEY_CONTENT_TYPE: HeaderName = HeaderName::from_static("key-content-type");

/// The text of a header, or a 400 if it is not visible ASCII.
pub(crate) fn text<'a>(
    headers: &'a HeaderMap,
    name: &HeaderName,
) -> Result<Option<&'a str>, RestError> {
    headers
        .get(name)
        .map(|value| {
            value.to_str().map_err(|_| {
                RestError::bad_request(format!("header `{name}` is not visible ASCII text"))
            })
        })
        .transpose()
}

/// A media type split into its lower-cased essence (`type/subtype`) and parameters (names
/// lower-cased, values unquoted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MediaType {
    pub(crate) essence: String,
    pub(crate) parameters: Vec<(String, String)>,
}

impl MediaType {
    /// Parses `type/subtype; name=value; …`. Lenient about spaces and quoting, as
    /// clients differ; the essence must contain a `/`.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split(';');
        let essence = parts.next()?.trim().to_ascii_lowercase();
        if !essence.contains('/') {
            return None;
        }
        let parameters = parts
            .filter_map(|part| {
                let (name, value) = part.split_once('=')?;
                let value = value.trim().trim_matches('"');
                Some((name.trim().to_ascii_lowercase(), value.to_owned()))
            })
            .collect();
        Some(Self {
            essence,
            parameters,
        })
    }

    /// The value of parameter `name` (lower-case).
    pub(crate) fn parameter(&self, name: &str) -> Option<&str> {
        self.parameters
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// The `Content-Type` of a request, if it has one.
///
/// # Errors
/// 400 if present but not a media type.
pub(crate) fn content_type(headers: &HeaderMap) -> Result<Option<MediaType>, RestError> {
    text(headers, &axum::http::header::CONTENT_TYPE)?
        .map(|value| {
            MediaType::parse(value)
                .ok_or_else(|| RestError::bad_request(format!("invalid Content-Type `{value}`")))
        })
        .transpose()
}

/// Parses one expiration header: a whole number of seconds, possibly negative.
fn seconds(headers: &HeaderMap, name: &HeaderName) -> Result<Option<i64>, RestError> {
    let Some(value) = text(headers, name)? else {
        return Ok(None);
    };
    value.trim().parse::<i64>().map(Some).map_err(|_| {
        RestError::bad_request(format!(
            "invalid {} header `{value}`: expected a whole number of seconds \
             (negative = never expires, 0 = the cache's default)",
            display_name(name)
        ))
    })
}

/// Infinispan's spelling of our lower-case header constants, for messages.
fn display_name(name: &HeaderName) -> &'static str {
    if name == TIME_TO_LIVE {
        "timeToLiveSeconds"
    } else if name == MAX_IDLE {
        "maxIdleTimeSeconds"
    } else {
        "expiration"
    }
}

/// A header value of seconds as a lifetime: negative never expires, positive expires.
fn given_or_never(value: Option<i64>) -> Lifetime {
    match value {
        Some(seconds) if seconds > 0 => {
            Lifetime::After(Duration::from_secs(seconds.unsigned_abs()))
        }
        _ => Lifetime::Never,
    }
}

/// A header value of seconds as a lifetime when it stands alone: absent or 0 is the
/// cache's default.
fn given_or_default(value: Option<i64>) -> Lifetime {
    match value {
        None | Some(0) => Lifetime::Default,
        Some(seconds) if seconds < 0 => Lifetime::Never,
        Some(seconds) => Lifetime::After(Duration::from_secs(seconds.unsigned_abs())),
    }
}

/// The expiry a write asks for through `timeToLiveSeconds` and `maxIdleTimeSeconds`,
/// following Infinispan's documented rules (protocols.md §6):
/// * absent: the cache's default;
/// * negative: never expires;
/// * both 0: both defaults;
/// * only one 0: that one takes the cache's default, the other the value given, or never
///   expires if it was not given.
///
/// # Errors
/// 400 if either header is not a whole number.
pub(crate) fn expiry(headers: &HeaderMap) -> Result<Expiry, RestError> {
    let lifespan = seconds(headers, &TIME_TO_LIVE)?;
    let max_idle = seconds(headers, &MAX_IDLE)?;
    Ok(match (lifespan, max_idle) {
        (Some(0), Some(0)) => Expiry::default(),
        (Some(0), other) => Expiry {
            lifespan: Lifetime::Default,
            max_idle: given_or_never(other),
        },
        (other, Some(0)) => Expiry {
            lifespan: given_or_never(other),
            max_idle: Lifetime::Default,
        },
        (lifespan, max_idle) => Expiry {
            lifespan: given_or_default(lifespan),
            max_idle: given_or_default(max_idle),
        },
    })
}

/// How a value is labelled in a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueType {
    /// `application/octet-stream`: the default, bytes as stored.
    OctetStream,
    /// `text/plain; charset=UTF-8`.
    Text,
    /// `application/json`.
    Json,
    /// `application/x-protostream`.
    Protostream,
}

impl ValueType {
    /// The format values are converted to.
    pub(crate) fn format(self) -> Format {
        match self {
            Self::OctetStream => Format::Octet,
            Self::Text => Format::Text,
            Self::Json => Format::Json,
            Self::Protostream => Format::Protostream,
        }
    }

    /// What a value is read as when the client states no preference: JSON for a
    /// ProtoStream cache (as Infinispan), the stored bytes otherwise.
    pub(crate) fn default_for(stored: Format) -> Self {
        match stored {
            Format::Protostream | Format::Json => Self::Json,
            Format::Text => Self::Text,
            Format::Octet | Format::Opaque => Self::OctetStream,
        }
    }

    /// The `Content-Type` header value.
    pub(crate) fn content_type(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Self::OctetStream => "application/octet-stream",
            Self::Text => "text/plain; charset=UTF-8",
            Self::Json => "application/json",
            Self::Protostream => "application/x-protostream",
        })
    }
}

/// Picks the value's type from `Accept`: the acceptable type with the highest quality
/// (earliest on ties) among `text/plain`, `application/json`, `application/x-protostream`
/// and `application/octet-stream`; `None` when the client states no usable preference
/// (no header, wildcards only, or only types Weft does not produce), in which case the
/// cache's own type is used.
pub(crate) fn negotiate(headers: &HeaderMap) -> Option<ValueType> {
    let mut best: Option<(Option<ValueType>, f32)> = None;
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for range in value.split(',') {
            let Some(media) = MediaType::parse(range) else {
                continue;
            };
            let quality = media
                .parameter("q")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            if quality <= 0.0 {
                continue;
            }
            let candidate = match media.essence.as_str() {
                "text/plain" | "text/*" => Some(ValueType::Text),
                "application/json" => Some(ValueType::Json),
                "application/x-protostream" => Some(ValueType::Protostream),
                "application/octet-stream" => Some(ValueType::OctetStream),
                "application/*" | "*/*" => None,
                _ => continue,
            };
            if best.is_none_or(|(_, best_quality)| quality > best_quality) {
                best = Some((candidate, quality));
            }
        }
    }
    best.and_then(|(kind, _)| kind)
}

/// The format of a request body, from its `Content-Type`: JSON, ProtoStream, text, or
/// (absent or anything else) raw bytes.
pub(crate) fn body_format(headers: &HeaderMap) -> Result<Format, RestError> {
    Ok(match content_type(headers)? {
        None => Format::Octet,
        Some(media) => match media.essence.as_str() {
            "application/json" => Format::Json,
            "application/x-protostream" => Format::Protostream,
            essence if essence.starts_with("text/") => Format::Text,
            _ => Format::Octet,
        },
    })
}

/// One entity tag from a precondition header.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct EntityTag {
    weak: bool,
    opaque: String,
}

/// The tags of `If-Match` or `If-None-Match`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum EntityTags {
    /// `*`: any current entry.
    Any,
    /// A list of tags.
    List(Vec<EntityTag>),
}

impl EntityTags {
    /// Parses a comma-separated list of tags. Unquoted tokens are accepted too, since
    /// Infinispan's own ETags are bare numbers and clients echo them as such.
    fn parse(text: &str) -> Self {
        if text.trim() == "*" {
            return Self::Any;
        }
        let tags = text
            .split(',')
            .map(str::trim)
            .filter(|tag| !tag.is_empty())
            .map(|tag| {
                let (weak, tag) = match tag.strip_prefix("W/") {
                    Some(rest) => (true, rest),
                    None => (false, tag),
                };
                EntityTag {
                    weak,
                    opaque: tag.trim_matches('"').to_owned(),
                }
            })
            .collect();
        Self::List(tags)
    }

    /// RFC 9110 strong comparison (for `If-Match`): weak tags never match.
    fn matches_strongly(&self, entry: &CacheEntry) -> bool {
        let ours = entry.version().to_string();
        match self {
            Self::Any => true,
            Self::List(tags) => tags.iter().any(|tag| !tag.weak && tag.opaque == ours),
        }
    }

    /// RFC 9110 weak comparison (for `If-None-Match`).
    fn matches_weakly(&self, entry: &CacheEntry) -> bool {
        let ours = entry.version().to_string();
        match self {
            Self::Any => true,
            Self::List(tags) => tags.iter().any(|tag| tag.opaque == ours),
        }
    }
}

/// The ETag of an entry: its version, quoted. Versions change on every write, so equal
/// tags mean the same write, which is what both caching and optimistic locking need.
pub(crate) fn etag(entry: &CacheEntry) -> HeaderValue {
    // A quoted decimal number is always a valid header value.
    HeaderValue::from_str(&format!("\"{}\"", entry.version()))
        .unwrap_or_else(|_| HeaderValue::from_static("\"0\""))
}

/// The first instant an HTTP date cannot write (10000-01-01T00:00:00Z): dates have four
/// year digits, and `httpdate` panics past them. Huge lifespans reach it easily.
const HTTP_DATE_MS_END: u64 = 253_402_300_800_000;

/// Milliseconds since the epoch as an HTTP date header value; `None` past year 9999.
pub(crate) fn http_date(epoch_ms: u64) -> Option<HeaderValue> {
    if epoch_ms >= HTTP_DATE_MS_END {
        return None;
    }
    let time = UNIX_EPOCH.checked_add(Duration::from_millis(epoch_ms))?;
    HeaderValue::from_str(&httpdate::fmt_http_date(time)).ok()
}

/// Parses an HTTP date header into whole seconds since the epoch.
fn date_seconds(headers: &HeaderMap, name: &HeaderName) -> Result<Option<u64>, RestError> {
    let Some(value) = text(headers, name)? else {
        return Ok(None);
    };
    let time = httpdate::parse_http_date(value.trim()).map_err(|_| {
        RestError::bad_request(format!(
            "invalid {name} header `{value}`: expected an HTTP date such as \
             `Sun, 06 Nov 1994 08:49:37 GMT`"
        ))
    })?;
    Ok(Some(
        time.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs()),
    ))
}

/// The entry's last modification in whole seconds, when known. Only mortal entries record
/// when they were written (immortal ones save the 8 bytes), so this is `None` for them and
/// date preconditions are then ignored, as RFC 9110 says for resources without a date.
fn modified_seconds(metadata: &EntryMetadata) -> Option<u64> {
    metadata.created_ms.map(|created| created / 1000)
}

/// What a precondition decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Refusal {
    /// 304: the client's copy is current.
    NotModified,
    /// 412: a precondition failed.
    Failed,
}

impl Refusal {
    /// The status to answer.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Self::NotModified => StatusCode::NOT_MODIFIED,
            Self::Failed => StatusCode::PRECONDITION_FAILED,
        }
    }
}

/// The HTTP preconditions of a request, evaluated in RFC 9110 §13.2.2 order.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Preconditions {
    if_match: Option<EntityTags>,
    if_none_match: Option<EntityTags>,
    if_modified_since: Option<u64>,
    if_unmodified_since: Option<u64>,
}

impl Preconditions {
    /// Reads `If-Match`, `If-None-Match`, `If-Modified-Since` and `If-Unmodified-Since`.
    ///
    /// # Errors
    /// 400 for a header that is not text or a date that does not parse.
    pub(crate) fn from_headers(headers: &HeaderMap) -> Result<Self, RestError> {
        Ok(Self {
            if_match: text(headers, &IF_MATCH)?.map(EntityTags::parse),
            if_none_match: text(headers, &IF_NONE_MATCH)?.map(EntityTags::parse),
            if_modified_since: date_seconds(headers, &IF_MODIFIED_SINCE)?,
            if_unmodified_since: date_seconds(headers, &IF_UNMODIFIED_SINCE)?,
        })
    }

    /// True when a write must look at the current entry before applying.
    pub(crate) fn constrain_write(&self) -> bool {
        self.if_match.is_some()
            || self.if_none_match.is_some()
            || self.if_unmodified_since.is_some()
    }

    /// For GET and HEAD of an existing entry.
    pub(crate) fn check_read(&self, entry: &CacheEntry) -> Result<(), Refusal> {
        let modified = modified_seconds(&entry.metadata());
        if let Some(tags) = &self.if_match {
            if !tags.matches_strongly(entry) {
                return Err(Refusal::Failed);
            }
        } else if let (Some(since), Some(modified)) = (self.if_unmodified_since, modified)
            && modified > since
        {
            return Err(Refusal::Failed);
        }
        if let Some(tags) = &self.if_none_match {
            if tags.matches_weakly(entry) {
                return Err(Refusal::NotModified);
            }
        } else if let (Some(since), Some(modified)) = (self.if_modified_since, modified)
            && modified <= since
        {
            return Err(Refusal::NotModified);
        }
        Ok(())
    }

    /// For PUT and DELETE, given the live entry (if any). `If-Match` needs an entry with a
    /// matching tag; `If-None-Match` refuses a matching one — with 304 for PUT, as
    /// Infinispan does, and 412 for DELETE, as RFC 9110 says.
    pub(crate) fn check_write(
        &self,
        current: Option<&CacheEntry>,
        is_put: bool,
    ) -> Result<(), Refusal> {
        if let Some(tags) = &self.if_match {
            if !current.is_some_and(|entry| tags.matches_strongly(entry)) {
                return Err(Refusal::Failed);
            }
        } else if let (Some(since), Some(modified)) = (
            self.if_unmodified_since,
            current.and_then(|entry| modified_seconds(&entry.metadata())),
        ) && modified > since
        {
            return Err(Refusal::Failed);
        }
        if let Some(tags) = &self.if_none_match
            && let Some(entry) = current
            && tags.matches_weakly(entry)
        {
            // `*` asks for "only if absent": a conflict, not a cache hit.
            let refusal = if is_put && tags != &EntityTags::Any {
                Refusal::NotModified
            } else {
                Refusal::Failed
            };
            return Err(refusal);
        }
        Ok(())
    }
}

/// Parses `Cache-Control: min-fresh=N` (seconds), which asks for entries that stay fresh
/// at least that long.
///
/// # Errors
/// 400 if `min-fresh` is not a whole number.
pub(crate) fn min_fresh_seconds(headers: &HeaderMap) -> Result<Option<u64>, RestError> {
    let Some(value) = text(headers, &axum::http::header::CACHE_CONTROL)? else {
        return Ok(None);
    };
    for directive in value.split(',') {
        if let Some((name, seconds)) = directive.split_once('=')
            && name.trim().eq_ignore_ascii_case("min-fresh")
        {
            return seconds
                .trim()
                .trim_matches('"')
                .parse::<u64>()
                .map(Some)
                .map_err(|_| {
                    RestError::bad_request(format!(
                        "invalid Cache-Control min-fresh `{}`: expected whole seconds",
                        seconds.trim()
                    ))
                });
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn after(seconds: u64) -> Lifetime {
        Lifetime::After(Duration::from_secs(seconds))
    }

    /// Request headers, then the lifespan and max idle they must mean.
    type Case = (&'static [(&'static str, &'static str)], Lifetime, Lifetime);

    // Proves every row of Infinispan's documented expiration-header rules.
    #[test]
    fn expiration_rules() {
        let cases: &[Case] = &[
            (&[], Lifetime::Default, Lifetime::Default),
            (&[("timetoliveseconds", "10")], after(10), Lifetime::Default),
            (&[("maxidletimeseconds", "7")], Lifetime::Default, after(7)),
            (
                &[("timetoliveseconds", "-1")],
                Lifetime::Never,
                Lifetime::Default,
            ),
            (
                &[("timetoliveseconds", "0"), ("maxidletimeseconds", "0")],
                Lifetime::Default,
                Lifetime::Default,
            ),
            (
                &[("timetoliveseconds", "0")],
                Lifetime::Default,
                Lifetime::Never,
            ),
            (
                &[("maxidletimeseconds", "0")],
                Lifetime::Never,
                Lifetime::Default,
            ),
            (
                &[("timetoliveseconds", "0"), ("maxidletimeseconds", "5")],
                Lifetime::Default,
                after(5),
            ),
            (
                &[("timetoliveseconds", "9"), ("maxidletimeseconds", "0")],
                after(9),
                Lifetime::Default,
            ),
            (
                &[("timetoliveseconds", "-5"), ("maxidletimeseconds", "0")],
                Lifetime::Never,
                Lifetime::Default,
            ),
            (
                &[("timetoliveseconds", " 3 "), ("maxidletimeseconds", "-1")],
                after(3),
                Lifetime::Never,
            ),
        ];
        for (pairs, lifespan, max_idle) in cases {
            let mut map = HeaderMap::new();
            for (name, value) in *pairs {
                map.append(
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                );
            }
            let expiry = expiry(&map);
            assert_eq!(
                expiry,
                Ok(Expiry {
                    lifespan: *lifespan,
                    max_idle: *max_idle
                }),
                "{pairs:?}"
            );
        }
    }

    // Proves non-numeric expiration headers are refused with the header's name.
    #[test]
    fn bad_expiration_headers() {
        for value in ["ten", "1.5", "", "99999999999999999999"] {
            let mut map = HeaderMap::new();
            map.insert(TIME_TO_LIVE, HeaderValue::from_static(value));
            let error = expiry(&map).err();
            assert!(
                error.is_some_and(|e| e
                    == RestError::bad_request(format!(
                        "invalid timeToLiveSeconds header `{value}`: expected a whole number of \
                         seconds (negative = never expires, 0 = the cache's default)"
                    ))),
                "{value}"
            );
        }
    }

    // Proves Accept picks by quality and order, and falls back to octet-stream.
    #[test]
    fn negotiation() {
        assert_eq!(negotiate(&headers(&[])), None);
        assert_eq!(
            negotiate(&headers(&[("accept", "text/plain")])),
            Some(ValueType::Text)
        );
        assert_eq!(
            negotiate(&headers(&[("accept", "application/json, text/plain")])),
            Some(ValueType::Json)
        );
        assert_eq!(
            negotiate(&headers(&[(
                "accept",
                "application/json;q=0.5, text/plain"
            )])),
            Some(ValueType::Text)
        );
        assert_eq!(
            negotiate(&headers(&[("accept", "text/plain;q=0, */*")])),
            None
        );
        assert_eq!(negotiate(&headers(&[("accept", "application/xml")])), None);
    }

    // Proves tag lists, weak tags, `*` and bare tokens parse.
    #[test]
    fn entity_tags() {
        assert_eq!(EntityTags::parse(" * "), EntityTags::Any);
        assert_eq!(
            EntityTags::parse("\"1\", W/\"2\",3"),
            EntityTags::List(vec![
                EntityTag {
                    weak: false,
                    opaque: "1".into()
                },
                EntityTag {
                    weak: true,
                    opaque: "2".into()
                },
                EntityTag {
                    weak: false,
                    opaque: "3".into()
                },
            ])
        );
    }

    // Proves HTTP dates are written up to year 9999 and left out beyond, instead of panicking.
    #[test]
    fn http_dates_end_at_year_9999() {
        assert_eq!(
            http_date(0).as_ref().map(HeaderValue::as_bytes),
            Some(&b"Thu, 01 Jan 1970 00:00:00 GMT"[..])
        );
        assert!(http_date(HTTP_DATE_MS_END - 1).is_some());
        assert_eq!(http_date(HTTP_DATE_MS_END), None);
        assert_eq!(http_date(u64::MAX), None);
    }

    // Proves media types parse with parameters and quoting, and garbage does not.
    #[test]
    fn media_types() {
        let media = MediaType::parse("Application/Octet-Stream; Encoding=\"hex\"");
        assert_eq!(
            media,
            Some(MediaType {
                essence: "application/octet-stream".into(),
                parameters: vec![("encoding".into(), "hex".into())],
            })
        );
        assert_eq!(MediaType::parse("nonsense"), None);
    }
}
