//! Multi-key operations whose keys several members own (Hot Rod PUT_ALL and GET_ALL): the
//! keys are grouped by their primary, each group runs there (here, or sent to that member),
//! and a group whose primary moved meanwhile is grouped again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use weft_cluster::wire::{EntryImage, Request, Response};
use weft_core::{Cache, CacheEntry, WriteOptions};

use super::node::Node;
use super::routing::Route;

/// How often a group is sent again after its primary moved, before the operation fails.
const ATTEMPTS: usize = 50;
const PAUSE: Duration = Duration::from_millis(100);

pub use weft_cluster::operation::{from_wire, to_wire};

/// Groups `items` by where `route` sends each (`None` = here).
fn group<T>(items: Vec<T>, route: impl Fn(&T) -> Route) -> HashMap<Option<SocketAddr>, Vec<T>> {
    let mut groups: HashMap<Option<SocketAddr>, Vec<T>> = HashMap::new();
    for item in items {
        let at = match route(&item) {
            Route::Local => None,
            Route::Remote(_, address) => Some(address),
        };
        groups.entry(at).or_default().push(item);
    }
    groups
}

impl Node {
    /// Writes `entries` (keys and values as stored) each at its key's primary, with
    /// `options`; done when every group is acknowledged (by its backups too, in a sync
    /// cache).
    ///
    /// # Errors
    /// When a group failed, or its primary kept moving.
    pub async fn put_at_primaries(
        &self,
        cache: &Cache,
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        options: &WriteOptions,
    ) -> crate::Result<()> {
        let mut pending = entries;
        for _ in 0..ATTEMPTS {
            let routing = self.routing();
            let groups = group(pending, |(key, _)| {
                routing.write_route(cache.name(), cache.segment_of(key))
            });
            pending = Vec::new();
            for (at, entries) in groups {
                match at {
                    None => {
                        let pairs = entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice()));
                        let (written, durability) =
                            weft_core::collect_durability(|| cache.put_all(pairs, options));
                        written?;
                        durability.wait().await?;
                    }
                    Some(address) => {
                        let request = Request::PutEntries {
                            cache: cache.name().to_owned(),
                            entries: entries.clone(),
                            lifespan: to_wire(options.expiry.lifespan),
                            max_idle: to_wire(options.expiry.max_idle),
                            flags: options.user_flags,
                            skip_listeners: options.skip_listeners,
                        };
                        match self.call(address, request).await {
                            Ok(Response::Ok) => {}
                            Ok(Response::Error(reason)) => {
                                crate::error::bail!("{address}: {reason}")
                            }
                            Ok(_) | Err(_) => pending.extend(entries),
                        }
                    }
                }
            }
            if pending.is_empty() {
                return Ok(());
            }
            tokio::time::sleep(PAUSE).await;
        }
        crate::error::bail!("the owners of some keys kept moving; retry")
    }

    /// Reads `keys` (as stored) each at its key's primary; the entries found, by key.
    ///
    /// # Errors
    /// When a group failed, or its primary kept moving.
    pub async fn get_at_primaries(
        &self,
        cache: &Cache,
        keys: Vec<Vec<u8>>,
    ) -> crate::Result<HashMap<Vec<u8>, CacheEntry>> {
        let mut found = HashMap::new();
        let mut pending = keys;
        for _ in 0..ATTEMPTS {
            let routing = self.routing();
            let groups = group(pending, |key| {
                routing.read_route(cache.name(), cache.segment_of(key))
            });
            pending = Vec::new();
            for (at, keys) in groups {
                match at {
                    None => {
                        let (read, durability) = weft_core::collect_durability(|| {
                            keys.iter()
                                .map(|key| cache.get_entry(key))
                                .collect::<Result<Vec<_>, _>>()
                        });
                        let read = read?;
                        durability.wait().await?;
                        for (key, entry) in keys.into_iter().zip(read) {
                            if let Some(entry) = entry {
                                found.insert(key, entry);
                            }
                        }
                    }
                    Some(address) => {
                        let request = Request::GetEntries {
                            cache: cache.name().to_owned(),
                            keys: keys.clone(),
                        };
                        match self.call(address, request).await {
                            Ok(Response::Entries { entries, .. }) => {
                                for image in entries {
                                    let entry = image.to_entry()?;
                                    found.insert(image.key, entry);
                                }
                            }
                            Ok(Response::Error(reason)) => {
                                crate::error::bail!("{address}: {reason}")
                            }
                            Ok(_) | Err(_) => pending.extend(keys),
                        }
                    }
                }
            }
            if pending.is_empty() {
                return Ok(found);
            }
            tokio::time::sleep(PAUSE).await;
        }
        crate::error::bail!("the owners of some keys kept moving; retry")
    }

    /// Answers [`Request::PutEntries`]: writes them as their primary, or `NotOwner`.
    pub(super) async fn answer_put_entries(
        &self,
        local: &Cache,
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        options: WriteOptions,
    ) -> Response {
        if !self.primary_of_all(local, entries.iter().map(|(k, _)| k), true) {
            return Response::NotOwner { owner: None };
        }
        let pairs = entries.iter().map(|(k, v)| (k.as_slice(), v.as_slice()));
        let (written, durability) =
            weft_core::collect_durability(|| local.put_all(pairs, &options));
        match (written, durability.wait().await) {
            (Ok(()), Ok(())) => Response::Ok,
            (Err(error), _) => Response::Error(error.to_string()),
            (_, Err(error)) => Response::Error(error.to_string()),
        }
    }

    /// Answers [`Request::GetEntries`]: reads them as their primary, or `NotOwner`.
    pub(super) async fn answer_get_entries(&self, local: &Cache, keys: Vec<Vec<u8>>) -> Response {
        if !self.primary_of_all(local, keys.iter(), false) {
            return Response::NotOwner { owner: None };
        }
        let (read, durability) = weft_core::collect_durability(|| {
            keys.iter()
                .map(|key| local.get_entry(key))
                .collect::<Result<Vec<_>, _>>()
        });
        match (read, durability.wait().await) {
            (Ok(entries), Ok(())) => Response::Entries {
                entries: entries.iter().flatten().map(EntryImage::of).collect(),
                done: true,
            },
            (Err(error), _) => Response::Error(error.to_string()),
            (_, Err(error)) => Response::Error(error.to_string()),
        }
    }

    /// Whether this node is where every one of `keys` is written (or read) now.
    fn primary_of_all<'a>(
        &self,
        local: &Cache,
        mut keys: impl Iterator<Item = &'a Vec<u8>>,
        write: bool,
    ) -> bool {
        let routing = self.routing();
        if routing.cache(local.name()).is_none() {
            return false;
        }
        keys.all(|key| {
            let segment = local.segment_of(key);
            let route = if write {
                routing.write_route(local.name(), segment)
            } else {
                routing.read_route(local.name(), segment)
            };
            route == Route::Local
        })
    }
}
