//! A session: the server commands go to (changed by `connect`), and what each command does
//! there — the REST requests it makes and the [`Output`] it makes of the answers.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{Client, Method, Request, ServerUrl};
use crate::command::{
    CacheCommand, ClusterCommand, Connect, Encoding, Entries, Get, KeyEncoding, Listing, Put,
    Remove, ShellCommand, Stats, UserCommand,
};
use crate::encoding::{
    accept, key_segment, listing_key_type, seconds, segment, show_value, value_bytes,
};
use crate::error::CliError;
use crate::output::{Output, Table, cell, fields_table};
use crate::progress::{self, Display};

/// Runs `user …` commands against a users file; the binary that embeds the shell hands one
/// in (users live in a file beside the server, edited by the server crate's code). Returns
/// what to print (for `user list`, JSON `{"users": [{"name": …, "groups": […]}]}`; for the
/// others `{"user": …, "done": "<the text>"}`), or why it failed.
pub type UsersFile = Box<dyn Fn(&UserCommand) -> Result<Output, String>>;

/// The Infinispan templates `cache create --template` takes (`org.infinispan.` may be left
/// out); the server says which it supports.
pub const TEMPLATES: [&str; 5] = [
    "org.infinispan.LOCAL",
    "org.infinispan.REPL_SYNC",
    "org.infinispan.REPL_ASYNC",
    "org.infinispan.DIST_SYNC",
    "org.infinispan.DIST_ASYNC",
];

/// How long the shell waits for cache names to complete with: a slow server must not freeze
/// the Tab key.
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(1);

/// What running a command led to.
#[derive(Debug)]
pub enum Outcome {
    /// Print this.
    Done(Output),
    /// Leave the shell.
    Quit,
}

/// The connection settings and the client built from them.
pub struct Session {
    client: Client,
    ca_file: Option<PathBuf>,
    users: Option<UsersFile>,
    /// How rebalance progress is drawn.
    display: Display,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("client", &self.client)
            .field("ca_file", &self.ca_file)
            .field("users", &self.users.is_some())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session with `url` (not contacted yet).
    ///
    /// # Errors
    /// As [`Client::new`], and [`CliError::Usage`] for a malformed URL.
    pub fn new(
        url: &str,
        credentials: Option<(String, String)>,
        ca_file: Option<PathBuf>,
        users: Option<UsersFile>,
        display: Display,
    ) -> Result<Self, CliError> {
        let client = Client::new(ServerUrl::parse(url)?, credentials, ca_file.as_deref())?;
        Ok(Self {
            client,
            ca_file,
            users,
            display,
        })
    }

    /// The server commands go to.
    #[must_use]
    pub fn url(&self) -> &ServerUrl {
        self.client.url()
    }

    /// The caches' names, for completion: quickly or not at all.
    #[must_use]
    pub fn cache_names_quickly(&self) -> Vec<String> {
        self.client
            .send_within(
                Request::new(Method::Get, "/rest/v2/caches"),
                COMPLETION_TIMEOUT,
            )
            .ok()
            .filter(|response| response.is_success())
            .and_then(|response| response.json().ok())
            .and_then(|names| serde_json::from_value(names).ok())
            .unwrap_or_default()
    }

    /// Runs `command`.
    ///
    /// # Errors
    /// Why it failed, said for the person who typed it.
    pub fn run(&mut self, command: ShellCommand) -> Result<Outcome, CliError> {
        let output = match command {
            ShellCommand::Connect(connect) => self.connect(connect)?,
            ShellCommand::Cache(cache) => self.cache(cache)?,
            ShellCommand::Get(get) => self.get(&get)?,
            ShellCommand::Put(put) => self.put(&put)?,
            ShellCommand::Remove(remove) => self.remove(&remove)?,
            ShellCommand::Keys(listing) => self.keys(&listing)?,
            ShellCommand::Entries(entries) => self.entries(&entries)?,
            ShellCommand::Stats(stats) => self.stats(&stats)?,
            ShellCommand::Cluster(cluster) => self.cluster(cluster)?,
            ShellCommand::User(user) => self.user(&user)?,
            ShellCommand::Shutdown => self.shutdown()?,
            ShellCommand::Quit => return Ok(Outcome::Quit),
        };
        Ok(Outcome::Done(output))
    }

    fn connect(&mut self, connect: Connect) -> Result<Output, CliError> {
        let url = match &connect.url {
            Some(url) => ServerUrl::parse(url)?,
            None => self.client.url().clone(),
        };
        let same_server = url == *self.client.url();
        let credentials = match (connect.user, connect.password) {
            (Some(user), Some(password)) => Some((user, password)),
            (Some(user), None) => {
                return Err(CliError::usage(format!(
                    "give the password of `{user}` with --password"
                )));
            }
            (None, Some(_)) => return Err(CliError::usage("--password needs --user")),
            // Reconnecting to the same server keeps the credentials it was reached with.
            (None, None) if same_server => self.client.credentials().cloned(),
            (None, None) => None,
        };
        let ca_file = match connect.cacert {
            Some(file) => Some(file),
            None if url.tls => self.ca_file.clone(),
            None => None,
        };
        let client = Client::new(url, credentials, ca_file.as_deref())?;
        let server = client
            .call(Request::new(Method::Get, "/rest/v2/server"))?
            .json()?;
        let version = server["version"]
            .as_str()
            .unwrap_or("an unknown version")
            .to_owned();
        let user = client.user().map(str::to_owned);
        let text = match &user {
            Some(user) => format!("Connected to {} ({version}) as {user}.", client.url()),
            None => format!("Connected to {} ({version}).", client.url()),
        };
        let json = json!({"url": client.url().to_string(), "version": version, "user": user});
        self.client = client;
        self.ca_file = ca_file;
        Ok(Output::new(text, json))
    }

    fn cache(&mut self, command: CacheCommand) -> Result<Output, CliError> {
        match command {
            CacheCommand::List => {
                let names = self
                    .client
                    .call(Request::new(Method::Get, "/rest/v2/caches"))?
                    .json()?;
                let text: String = names
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|name| format!("{}\n", cell(name)))
                    .collect();
                Ok(Output::new(text, names))
            }
            CacheCommand::Create {
                name,
                template,
                file,
            } => {
                let mut path = format!("/rest/v2/caches/{}", segment(&name));
                let mut request = Request::new(Method::Post, String::new());
                if let Some(template) = template {
                    let template = if template.contains('.') {
                        template
                    } else {
                        format!("org.infinispan.{template}")
                    };
                    path.push_str(&format!("?template={}", segment(&template)));
                } else if let Some(file) = file {
                    let body = std::fs::read(&file).map_err(|error| {
                        CliError::Local(format!("read {}: {error}", file.display()))
                    })?;
                    request = request.header("Content-Type", configuration_type(&file, &body));
                    request = request.body(body);
                }
                request.path = path;
                self.client.call(request)?;
                Ok(Output::new(
                    format!("Created cache `{name}`."),
                    json!({"cache": name, "created": true}),
                ))
            }
            CacheCommand::Describe { name } => self.describe(&name),
            CacheCommand::Clear { name } => {
                self.client.call(Request::new(
                    Method::Post,
                    format!("/rest/v2/caches/{}?action=clear", segment(&name)),
                ))?;
                Ok(Output::new(
                    format!("Cleared cache `{name}`."),
                    json!({"cache": name, "cleared": true}),
                ))
            }
            CacheCommand::Remove { name } => {
                self.client.call(Request::new(
                    Method::Delete,
                    format!("/rest/v2/caches/{}", segment(&name)),
                ))?;
                Ok(Output::new(
                    format!("Removed cache `{name}`."),
                    json!({"cache": name, "removed": true}),
                ))
            }
        }
    }

    fn describe(&self, name: &str) -> Result<Output, CliError> {
        let path = format!("/rest/v2/caches/{}", segment(name));
        let details = self
            .client
            .call(Request::new(Method::Get, path.clone()))?
            .json()?;
        // The details' size is this node's; `?action=size` counts a clustered cache's
        // entries across the cluster.
        let size = self
            .client
            .call(Request::new(Method::Get, format!("{path}?action=size")))?
            .json()?;
        let configuration = details["configuration"].clone();
        let statistics = details["stats"].clone();
        let mut summary = Table::new(&["CACHE", "MODE", "SIZE", "BOUNDED", "STATISTICS"]);
        summary.row(vec![
            name.to_owned(),
            cell(&details["mode"]),
            cell(&size),
            cell(&details["bounded"]),
            cell(&details["statistics"]),
        ]);
        let pretty = serde_json::to_string_pretty(&configuration).unwrap_or_default();
        let text = format!(
            "{}\nConfiguration:\n{}\n\nStatistics:\n{}",
            summary.render(),
            pretty,
            fields_table(&statistics).render()
        );
        let json = json!({
            "cache": name,
            "size": size,
            "mode": details["mode"],
            "configuration": configuration,
            "statistics": statistics,
            "details": details,
        });
        Ok(Output::new(text, json))
    }

    fn entry_request(
        method: Method,
        cache: &str,
        key: &str,
        key_encoding: KeyEncoding,
    ) -> Result<Request, CliError> {
        let (key_segment, key_type) = key_segment(key, key_encoding)?;
        let mut request = Request::new(
            method,
            format!("/rest/v2/caches/{}/{key_segment}", segment(cache)),
        );
        if let Some(key_type) = key_type {
            request = request.header("Key-Content-Type", key_type);
        }
        Ok(request)
    }

    fn get(&self, get: &Get) -> Result<Output, CliError> {
        let request = Self::entry_request(Method::Get, &get.cache, &get.key, get.key_encoding)?
            .header("Accept", accept(get.encoding));
        let response = self.client.send(request)?;
        if response.status == 404 {
            return Err(CliError::Http {
                status: "404 Not Found".to_owned(),
                message: not_found(&response.text(), &get.cache, &get.key),
            });
        }
        if !response.is_success() {
            return Err(response.into_error());
        }
        let (text, value) = show_value(&response.body, get.encoding)?;
        Ok(Output::new(
            text,
            json!({
                "cache": get.cache,
                "key": get.key,
                "value": value,
                "encoding": encoding_name(get.encoding),
            }),
        ))
    }

    fn put(&self, put: &Put) -> Result<Output, CliError> {
        let (body, content_type) = match (&put.value, &put.file) {
            (_, Some(file)) => (
                std::fs::read(file).map_err(|error| {
                    CliError::Local(format!("read {}: {error}", file.display()))
                })?,
                match put.encoding {
                    Encoding::Json => "application/json",
                    Encoding::Text => "text/plain; charset=UTF-8",
                    Encoding::Hex | Encoding::Base64 => "application/octet-stream",
                },
            ),
            (Some(value), None) => value_bytes(value, put.encoding)?,
            (None, None) => return Err(CliError::usage("give a value, or --file FILE")),
        };
        let method = if put.if_absent {
            Method::Post
        } else {
            Method::Put
        };
        let mut request = Self::entry_request(method, &put.cache, &put.key, put.key_encoding)?
            .header("Content-Type", content_type)
            .body(body);
        if let Some(lifespan) = &put.lifespan {
            request = request.header(
                "timeToLiveSeconds",
                seconds("lifespan", lifespan)?.to_string(),
            );
        }
        if let Some(max_idle) = &put.max_idle {
            request = request.header(
                "maxIdleTimeSeconds",
                seconds("max-idle", max_idle)?.to_string(),
            );
        }
        self.client.call(request)?;
        Ok(Output::new(
            String::new(),
            json!({"cache": put.cache, "key": put.key, "stored": true}),
        ))
    }

    fn remove(&self, remove: &Remove) -> Result<Output, CliError> {
        let request = Self::entry_request(
            Method::Delete,
            &remove.cache,
            &remove.key,
            remove.key_encoding,
        )?;
        let response = self.client.send(request)?;
        if response.status == 404 {
            return Err(CliError::Http {
                status: "404 Not Found".to_owned(),
                message: not_found(&response.text(), &remove.cache, &remove.key),
            });
        }
        if !response.is_success() {
            return Err(response.into_error());
        }
        Ok(Output::new(
            String::new(),
            json!({"cache": remove.cache, "key": remove.key, "removed": true}),
        ))
    }

    fn listing(
        &self,
        cache: &str,
        action: &str,
        limit: Option<u64>,
        key_type: Option<&'static str>,
    ) -> Result<Value, CliError> {
        let mut path = format!("/rest/v2/caches/{}?action={action}", segment(cache));
        if let Some(limit) = limit {
            path.push_str(&format!("&limit={limit}"));
        }
        let mut request = Request::new(Method::Get, path);
        if let Some(key_type) = key_type {
            request = request.header("Key-Content-Type", key_type);
        }
        self.client.call(request)?.json()
    }

    fn keys(&self, listing: &Listing) -> Result<Output, CliError> {
        let mut keys = self.listing(
            &listing.cache,
            "keys",
            listing.limit,
            listing_key_type(listing.key_encoding),
        )?;
        if listing.key_encoding == KeyEncoding::Hex {
            keys.as_array_mut()
                .into_iter()
                .flatten()
                .for_each(strip_hex_prefix);
        }
        let text: String = keys
            .as_array()
            .into_iter()
            .flatten()
            .map(|key| format!("{}\n", cell(key)))
            .collect();
        Ok(Output::new(text, keys))
    }

    fn entries(&self, entries: &Entries) -> Result<Output, CliError> {
        let key_type = match entries.encoding {
            Encoding::Text | Encoding::Json => None,
            Encoding::Hex => listing_key_type(KeyEncoding::Hex),
            Encoding::Base64 => listing_key_type(KeyEncoding::Base64),
        };
        let action = if entries.metadata {
            "entries&metadata=true"
        } else {
            "entries"
        };
        let mut listed = self.listing(&entries.cache, action, entries.limit, key_type)?;
        let mut header = vec!["KEY", "VALUE"];
        if entries.metadata {
            header.extend(["LIFESPAN", "MAX-IDLE", "VERSION"]);
        }
        let mut table = Table::new(&header);
        for entry in listed.as_array_mut().into_iter().flatten() {
            if entries.encoding == Encoding::Hex {
                strip_hex_prefix(&mut entry["key"]);
                strip_hex_prefix(&mut entry["value"]);
            }
            if entries.encoding == Encoding::Json
                && let Some(parsed) = entry["value"]
                    .as_str()
                    .and_then(|value| serde_json::from_str::<Value>(value).ok())
            {
                entry["value"] = parsed;
            }
            let mut row = vec![cell(&entry["key"]), cell(&entry["value"])];
            if entries.metadata {
                let seconds = |field: &str| match entry[field].as_i64() {
                    Some(-1) | None => "-".to_owned(),
                    Some(seconds) => format!("{seconds}s"),
                };
                row.extend([
                    seconds("timeToLiveSeconds"),
                    seconds("maxIdleTimeSeconds"),
                    cell(&entry["version"]),
                ]);
            }
            table.row(row);
        }
        Ok(Output::new(table.render(), listed))
    }

    fn stats(&self, stats: &Stats) -> Result<Output, CliError> {
        let path = match &stats.cache {
            Some(cache) => format!("/rest/v2/caches/{}?action=stats", segment(cache)),
            None => "/rest/v2/container/stats".to_owned(),
        };
        let statistics = self.client.call(Request::new(Method::Get, path))?.json()?;
        Ok(Output::new(fields_table(&statistics).render(), statistics))
    }

    fn cluster(&self, command: ClusterCommand) -> Result<Output, CliError> {
        match command {
            ClusterCommand::Members => {
                let report = self.topology()?;
                Ok(progress::members_output(&report))
            }
            ClusterCommand::Topology { segments } => {
                let report = self.topology()?;
                Ok(progress::topology_output(&report, segments))
            }
            ClusterCommand::Rebalance { once, timeout } => progress::follow(
                &self.client,
                once,
                Duration::from_secs(timeout),
                progress::POLL_INTERVAL,
                &self.display,
            ),
        }
    }

    fn topology(&self) -> Result<Value, CliError> {
        self.client
            .call(Request::new(Method::Get, "/rest/v2/cluster/topology"))?
            .json()
    }

    fn user(&self, command: &UserCommand) -> Result<Output, CliError> {
        let Some(users) = &self.users else {
            return Err(CliError::Local(
                "this program cannot edit users files; use `weft user`".to_owned(),
            ));
        };
        users(command).map_err(CliError::Local)
    }

    fn shutdown(&self) -> Result<Output, CliError> {
        self.client
            .call(Request::new(Method::Post, "/rest/v2/server?action=stop"))?;
        let url = self.client.url().to_string();
        Ok(Output::new(
            format!("Asked {url} to stop."),
            json!({"url": url, "stopping": true}),
        ))
    }
}

/// The content type of a cache configuration file: by its extension, else by its first
/// character (`{` is JSON, anything else TOML).
fn configuration_type(file: &std::path::Path, body: &[u8]) -> &'static str {
    match file.extension().and_then(|extension| extension.to_str()) {
        Some("json") => "application/json",
        Some("toml") => "application/toml",
        _ if body.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'{') => {
            "application/json"
        }
        _ => "application/toml",
    }
}

/// A 404's message: the server's when it names the cache, else which key was missing.
fn not_found(server: &str, cache: &str, key: &str) -> String {
    if server.contains("cache") || server.contains("Cache") {
        server.trim().to_owned()
    } else {
        format!("no entry for key `{key}` in cache `{cache}`")
    }
}

/// A listing's hex string without the `0x` REST writes before it, as `--encoding hex` shows
/// bytes everywhere else.
fn strip_hex_prefix(value: &mut Value) {
    if let Some(hex) = value.as_str().and_then(|text| text.strip_prefix("0x")) {
        *value = Value::String(hex.to_owned());
    }
}

/// An encoding's name as `--encoding` takes it.
fn encoding_name(encoding: Encoding) -> &'static str {
    match encoding {
        Encoding::Text => "text",
        Encoding::Json => "json",
        Encoding::Hex => "hex",
        Encoding::Base64 => "base64",
    }
}
