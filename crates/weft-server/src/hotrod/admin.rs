//! Server tasks. Only the administration tasks `RemoteCacheManagerAdmin` sends are served:
//! `@@cache@create`, `@@cache@getorcreate`, `@@cache@remove`, `@@cache@names`,
//! `@@cache@templates`. A configuration string may be Infinispan JSON
//! (`{"distributed-cache":{...}}`), Infinispan XML (`<distributed-cache>...</distributed-cache>`)
//! or Weft TOML; a template is one of `weft_core::config::TEMPLATES`.
//!
//! Creating and removing a cache may wait on the cluster (a clustered cache is defined and
//! removed on every node through consensus: see `ServerContext::define_cache`), so those
//! tasks run off the connection's reading loop and answer through its outbound queue.

use std::sync::Arc;

use bytes::BytesMut;
use serde_json::{Map, Value};
use weft_core::CacheConfig;
use weft_hotrod::wire::put_array;
use weft_hotrod::{Frame, Request, Span, Status};

use super::Connection;
use super::ops::Failure;
use crate::CacheAdminError;

/// Attributes of Infinispan's clustered caches that Weft has no counterpart for; a client's
/// configuration may carry them, and they change nothing here.
const CLUSTERING_ATTRIBUTES_IGNORED: [&str; 6] = [
    "remote-timeout",
    "l1-lifespan",
    "capacity-factor",
    "state-transfer",
    "backups",
    "zero-capacity",
];

/// The value of parameter `name` of a task, as text.
fn param(frame: &Frame, params: &[(String, Span)], name: &str) -> Option<String> {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, span)| String::from_utf8_lossy(frame.slice(*span)).into_owned())
}

/// Serves the tasks that create or remove caches off the reading loop; false for any other
/// request (served as usual, by [`exec`]).
pub(super) fn changes_caches(connection: &Arc<Connection>, frame: &Frame) -> bool {
    let Request::Exec { task, .. } = &frame.request else {
        return false;
    };
    if !matches!(
        task.as_str(),
        "@@cache@create" | "@@cache@getorcreate" | "@@cache@remove"
    ) {
        return false;
    }
    let connection = Arc::clone(connection);
    let frame = frame.clone();
    tokio::spawn(async move {
        let response = change_caches(&connection, &frame).await.map(|()| {
            let mut out = BytesMut::new();
            super::ops::plain_header(&mut out, &frame, Status::Success);
            put_array(&mut out, &[]);
            out
        });
        super::ops::send_later(&connection, &frame, response).await;
    });
    true
}

async fn change_caches(connection: &Connection, frame: &Frame) -> Result<(), Failure> {
    let Request::Exec { task, params } = &frame.request else {
        return Ok(());
    };
    let context = &connection.context;
    let name =
        param(frame, params, "name").ok_or_else(|| Failure::server("missing parameter 'name'"))?;
    let failed = |error: CacheAdminError| Failure::server(error.to_string());
    if task == "@@cache@remove" {
        if context.remove_cache(&name).await.map_err(failed)? {
            tracing::info!(cache = name, "cache removed by a Hot Rod admin request");
        }
        return Ok(());
    }
    let config = match (
        param(frame, params, "configuration"),
        param(frame, params, "template"),
    ) {
        (Some(text), _) => parse_configuration(&text)?,
        (None, Some(template)) => template_config(&template)?,
        (None, None) => CacheConfig::default(),
    };
    let created = context.define_cache(&name, config).await.map_err(failed)?;
    if created {
        tracing::info!(cache = name, "cache created by a Hot Rod admin request");
    } else if task == "@@cache@create" {
        return Err(Failure::server(format!(
            "org.infinispan.commons.CacheConfigurationException: ISPN000507: Cache {name} already exists"
        )));
    }
    Ok(())
}

/// Serves the tasks that only read: cache names and templates.
pub(super) fn exec(
    connection: &Connection,
    frame: &Frame,
    task: &str,
    out: &mut BytesMut,
) -> Result<(), Failure> {
    let result: Vec<u8> = match task {
        "@@cache@names" => serde_json::to_vec(&connection.context.manager.cache_names())
            .map_err(|e| Failure::server(e.to_string()))?,
        "@@cache@templates" => serde_json::to_vec(&weft_core::config::TEMPLATES)
            .map_err(|e| Failure::server(e.to_string()))?,
        other => return Err(Failure::server(format!("Unknown task '{other}'"))),
    };
    super::ops::plain_header(out, frame, Status::Success);
    put_array(out, &result);
    Ok(())
}

/// The configuration of Infinispan's template `template`, or the error Infinispan answers
/// (clients match on its `ISPN` code).
fn template_config(template: &str) -> Result<CacheConfig, Failure> {
    weft_core::config::template(template).map_err(|error| {
        Failure::server(format!(
            "org.infinispan.commons.CacheConfigurationException: {error}"
        ))
    })
}

/// Parses a configuration string in any of the accepted forms.
pub(super) fn parse_configuration(text: &str) -> Result<CacheConfig, Failure> {
    let trimmed = text.trim_start();
    let invalid =
        |e: &dyn std::fmt::Display| Failure::server(format!("invalid cache configuration: {e}"));
    if trimmed.starts_with('<') {
        let json = xml_to_json(trimmed).map_err(|e| invalid(&e))?;
        let json = normalize(json);
        return CacheConfig::from_json("configuration", &json.to_string()).map_err(|e| invalid(&e));
    }
    if trimmed.starts_with('{') {
        let json: Value = serde_json::from_str(trimmed).map_err(|e| invalid(&e))?;
        return CacheConfig::from_json("configuration", &normalize(json).to_string())
            .map_err(|e| invalid(&e));
    }
    CacheConfig::from_toml("configuration", text).map_err(|e| invalid(&e))
}

/// Brings a configuration as Infinispan clients write it to the form
/// [`CacheConfig::from_json`] reads: drops the `name` attribute (the name is a separate
/// parameter), `statistics-available`, and the clustering attributes Weft has no
/// counterpart for, and types quoted numbers and booleans. The kind of cache is kept: a
/// `distributed-cache` is distributed (on a server that is not clustered, a cluster of one).
fn normalize(json: Value) -> Value {
    let Value::Object(map) = json else {
        return json;
    };
    if map.len() != 1 {
        return Value::Object(map);
    }
    let Some((kind, body)) = map.into_iter().next() else {
        return Value::Object(Map::new());
    };
    let Value::Object(mut body) = body else {
        return Value::Object(Map::from_iter([(kind, body)]));
    };
    body.remove("name");
    body.remove("statistics-available");
    if kind.ends_with("-cache") && kind != "local-cache" {
        for attribute in CLUSTERING_ATTRIBUTES_IGNORED {
            body.remove(attribute);
        }
    }
    Value::Object(Map::from_iter([(kind, typed(Value::Object(body)))]))
}

/// Infinispan writes every attribute as a string (`"statistics": "true"`, `"max-count":
/// "100"`); booleans and whole numbers become typed values, recursively.
fn typed(value: Value) -> Value {
    match value {
        Value::String(text) => {
            if let Ok(n) = text.parse::<i64>() {
                Value::from(n)
            } else if text == "true" || text == "false" {
                Value::Bool(text == "true")
            } else {
                Value::String(text)
            }
        }
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, typed(v))).collect()),
        Value::Array(items) => Value::Array(items.into_iter().map(typed).collect()),
        other => other,
    }
}

/// Converts the first `*-cache` element of an XML document to Infinispan's JSON form:
/// attributes become members (numbers and booleans typed), child elements nested objects.
fn xml_to_json(text: &str) -> Result<Value, String> {
    fn find_cache(element: Element) -> Option<Element> {
        if element.name.ends_with("-cache") {
            return Some(element);
        }
        element.children.into_iter().find_map(find_cache)
    }
    let mut parser = XmlParser { text, pos: 0 };
    while let Some(element) = parser.next_element()? {
        if let Some(cache) = find_cache(element) {
            return Ok(Value::Object(Map::from_iter([(
                cache.name.clone(),
                cache.into_json(),
            )])));
        }
    }
    Err("no <...-cache> element".into())
}

struct Element {
    name: String,
    attributes: Vec<(String, String)>,
    children: Vec<Element>,
}

impl Element {
    fn into_json(self) -> Value {
        let mut map = Map::new();
        for (name, value) in self.attributes {
            let typed = if let Ok(n) = value.parse::<i64>() {
                Value::from(n)
            } else if value == "true" || value == "false" {
                Value::Bool(value == "true")
            } else {
                Value::String(value)
            };
            map.insert(name, typed);
        }
        for child in self.children {
            let name = child.name.clone();
            map.insert(name, child.into_json());
        }
        Value::Object(map)
    }
}

struct XmlParser<'a> {
    text: &'a str,
    pos: usize,
}

impl XmlParser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn skip_until(&mut self, end: &str) -> Result<(), String> {
        match self.rest().find(end) {
            Some(i) => {
                self.pos += i + end.len();
                Ok(())
            }
            None => Err(format!("unterminated markup, expected `{end}`")),
        }
    }

    /// The next element that starts at or after the cursor (with its subtree), skipping
    /// text, comments, declarations and end tags; `None` at the end.
    fn next_element(&mut self) -> Result<Option<Element>, String> {
        loop {
            let Some(i) = self.rest().find('<') else {
                return Ok(None);
            };
            self.pos += i;
            let rest = self.rest();
            if rest.starts_with("<!--") {
                self.skip_until("-->")?;
            } else if rest.starts_with("<?") || rest.starts_with("<!") || rest.starts_with("</") {
                self.skip_until(">")?;
            } else {
                return self.element().map(Some);
            }
        }
    }

    fn element(&mut self) -> Result<Element, String> {
        self.pos += 1; // '<'
        let name = self.name()?;
        let mut attributes = Vec::new();
        loop {
            self.skip_whitespace();
            let rest = self.rest();
            if rest.starts_with("/>") {
                self.pos += 2;
                return Ok(Element {
                    name,
                    attributes,
                    children: Vec::new(),
                });
            }
            if rest.starts_with('>') {
                self.pos += 1;
                break;
            }
            let attribute = self.name()?;
            self.skip_whitespace();
            if !self.rest().starts_with('=') {
                return Err(format!("attribute `{attribute}` has no value"));
            }
            self.pos += 1;
            self.skip_whitespace();
            let quote = self
                .rest()
                .chars()
                .next()
                .filter(|c| *c == '"' || *c == '\'');
            let Some(quote) = quote else {
                return Err(format!("attribute `{attribute}` value is not quoted"));
            };
            self.pos += 1;
            let end = self
                .rest()
                .find(quote)
                .ok_or("unterminated attribute value")?;
            let value = unescape(&self.rest()[..end]);
            self.pos += end + 1;
            attributes.push((attribute, value));
        }
        let mut children = Vec::new();
        loop {
            let Some(i) = self.rest().find('<') else {
                return Err(format!("element <{name}> is not closed"));
            };
            self.pos += i;
            let rest = self.rest();
            if let Some(after) = rest.strip_prefix("</") {
                let end = after.find('>').ok_or("unterminated end tag")?;
                if after[..end].trim() != name {
                    return Err(format!("</{}> closes <{name}>", after[..end].trim()));
                }
                self.pos += 2 + end + 1;
                return Ok(Element {
                    name,
                    attributes,
                    children,
                });
            }
            if rest.starts_with("<!--") {
                self.skip_until("-->")?;
            } else {
                children.push(self.element()?);
            }
        }
    }

    fn name(&mut self) -> Result<String, String> {
        let rest = self.rest();
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.')))
            .unwrap_or(rest.len());
        if end == 0 {
            return Err(format!("expected a name at byte {}", self.pos));
        }
        let name = rest[..end].to_owned();
        self.pos += end;
        Ok(name)
    }

    fn skip_whitespace(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }
}

fn unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the configuration forms clients send are understood.
    #[test]
    fn configuration_forms() {
        let xml = r#"<?xml version="1.0"?><!-- c --><local-cache name="x" statistics="true">
            <encoding media-type="application/x-protostream"/>
            <expiration lifespan="60000"/><memory max-count="100"></memory></local-cache>"#;
        let config = parse_configuration(xml).unwrap_or_else(|f| panic!("{}", f.message));
        assert_eq!(
            config.encoding.key_media_type(),
            Some("application/x-protostream")
        );
        assert_eq!(config.memory.max_count, Some(100));
        let json = r#"{"distributed-cache":{"mode":"SYNC","owners":2,"encoding":{"media-type":"text/plain"}}}"#;
        let config = parse_configuration(json).unwrap_or_else(|f| panic!("{}", f.message));
        assert_eq!(config.encoding.value_media_type(), Some("text/plain"));
        assert_eq!(config.mode, weft_core::CacheMode::Distributed);
        // What the 15.2 Java client sends for the LOCAL template.
        let config = parse_configuration(
            r#"{"local-cache":{"statistics":"true","memory":{"max-count":"10"}}}"#,
        )
        .unwrap_or_else(|f| panic!("{}", f.message));
        assert!(config.statistics);
        assert_eq!(config.memory.max_count, Some(10));
        let nested = "<infinispan><cache-container><local-cache><encoding><key media-type=\"text/plain\"/><value media-type=\"application/json\"/></encoding></local-cache></cache-container></infinispan>";
        let config = parse_configuration(nested).unwrap_or_else(|f| panic!("{}", f.message));
        assert_eq!(config.encoding.value_media_type(), Some("application/json"));
        for bad in [
            "<local-cache",
            "<local-cache a=1/>",
            "<local-cache></distributed-cache>",
            "<nothing/>",
            "{\"local-cache\":{\"nope\":1}}",
        ] {
            assert!(parse_configuration(bad).is_err(), "{bad}");
        }
    }
}
