//! Client listeners: registered on a cache, they encode each event for the registering
//! connection and queue it there (msgId 0), interleaved with that connection's responses.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::sync::mpsc::error::TrySendError;
use weft_core::listener::EventFilter;
use weft_core::{
    Cache, CacheEvent, EventKind as CoreKind, EventKinds, ListenerId, ListenerOptions, SourceFilter,
};
use weft_hotrod::Frame;
use weft_hotrod::response::{EventKind, write_event};

use weft_grid::iteration::{PAGE_MAX, SegmentCursor};
use weft_grid::node::Node;
use weft_hotrod::status::Status;

use super::Connection;
use super::ops::{Failure, Target};

/// Longest listener id accepted (clients send 16 random bytes).
const LISTENER_ID_BYTES_MAX: usize = 256;

struct Registered {
    connection: u64,
    cache: Cache,
    id: ListenerId,
}

/// Every client listener on the server, by registering connection and the id the client
/// gave it. Ids are only unique per client (the JS client counts `listener_1`, ...), so two
/// connections may register the same id.
#[derive(Default)]
pub(crate) struct ClientListeners {
    by_id: Mutex<HashMap<(u64, Vec<u8>), Registered>>,
}

impl std::fmt::Debug for ClientListeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientListeners")
            .field("registered", &self.by_id.lock().len())
            .finish()
    }
}

impl ClientListeners {
    /// Unregisters a listener, preferably the one this connection registered (a pooled
    /// client may remove it through another connection); false if unknown.
    pub(crate) fn remove(&self, connection: u64, listener_id: &[u8]) -> bool {
        let removed = {
            let mut by_id = self.by_id.lock();
            let key = (connection, listener_id.to_vec());
            match by_id.remove(&key) {
                Some(registered) => Some(registered),
                None => {
                    let other = by_id.keys().find(|(_, id)| id == listener_id).cloned();
                    other.and_then(|key| by_id.remove(&key))
                }
            }
        };
        match removed {
            Some(registered) => {
                registered.cache.remove_listener(registered.id);
                true
            }
            None => false,
        }
    }

    /// Unregisters every listener of a closed connection.
    pub(crate) fn remove_connection(&self, connection: u64) {
        let mut removed = Vec::new();
        self.by_id.lock().retain(|_, registered| {
            if registered.connection == connection {
                removed.push((registered.cache.clone(), registered.id));
                false
            } else {
                true
            }
        });
        for (cache, id) in removed {
            cache.remove_listener(id);
        }
    }
}

fn kinds_of(interests: u32) -> EventKinds {
    // Before 2.6 there was no mask: every kind.
    let interests = if interests == 0 { 0x0f } else { interests };
    [
        (1, CoreKind::Created),
        (2, CoreKind::Modified),
        (4, CoreKind::Removed),
        (8, CoreKind::Expired),
    ]
    .into_iter()
    .filter(|(bit, _)| interests & bit != 0)
    .map(|(_, kind)| kind)
    .collect()
}

fn wire_kind(kind: CoreKind) -> Option<EventKind> {
    match kind {
        CoreKind::Created => Some(EventKind::Created),
        CoreKind::Modified => Some(EventKind::Modified),
        CoreKind::Removed => Some(EventKind::Removed),
        CoreKind::Expired => Some(EventKind::Expired),
        // Evictions are not events for remote listeners (as in Infinispan).
        _ => None,
    }
}

/// Registers a listener for the connection; with `include_current_state`, appends a created
/// event (carrying the request's message id) for every entry to `out`, before the response.
/// The named filter an ADD_CLIENT_LISTENER names (`filterFactoryName` and its marshalled
/// parameters), if any.
pub(super) fn source_filter(
    frame: &Frame,
    factory: Option<&weft_hotrod::request::Factory>,
) -> Option<SourceFilter> {
    factory.map(|factory| SourceFilter {
        name: factory.name.clone(),
        params: factory
            .params
            .iter()
            .map(|param| frame.slice(*param).to_vec())
            .collect(),
    })
}

/// Registers a client listener; returns the filter it runs, if it names one (`source`, a
/// factory registered in the cache manager: it runs where each write is applied, and on the
/// listed current state too).
#[allow(clippy::too_many_arguments)]
pub(super) fn add(
    connection: &Arc<Connection>,
    frame: &Frame,
    target: &Target,
    listener_id: &[u8],
    include_current_state: bool,
    interests: u32,
    source: Option<SourceFilter>,
    out: &mut BytesMut,
) -> Result<Option<EventFilter>, Failure> {
    let mut options = ListenerOptions::default().kinds(kinds_of(interests));
    if let Some(source) = source {
        let name = source.name.clone();
        options = options
            .source_filter(connection.context.manager.event_filters(), source)
            .map_err(|error| {
                Failure::server(format!(
                    "listener filter factory '{name}' is not registered on this server: {error}"
                ))
            })?;
    }
    let filter = options.filter.clone();
    if listener_id.is_empty() || listener_id.len() > LISTENER_ID_BYTES_MAX {
        return Err(Failure::server(format!(
            "a listener id must be 1 to {LISTENER_ID_BYTES_MAX} bytes"
        )));
    }
    let listeners = &connection.context.hotrod.listeners;
    // The same id registered again replaces the old registration.
    if listeners
        .by_id
        .lock()
        .contains_key(&(connection.id, listener_id.to_vec()))
    {
        listeners.remove(connection.id, listener_id);
    }
    let shared_id: Arc<[u8]> = Arc::from(listener_id);
    let sender = connection.outbound.clone();
    let overflowed = Arc::clone(&connection.overflowed);
    let formats = target.formats;
    let event_id = Arc::clone(&shared_id);
    let handler = move |event: &CacheEvent| {
        let Some(kind) = wire_kind(event.kind()) else {
            return;
        };
        let Ok(key) = formats.key_out(event.key()) else {
            tracing::debug!(
                ?event,
                "event key has no form in the listener's media type; not sent"
            );
            return;
        };
        let version = event.new_entry().map_or(0, |entry| entry.version());
        let mut frame = BytesMut::with_capacity(32 + key.len() + event_id.len());
        write_event(&mut frame, 0, kind, &event_id, &key, version, false);
        match sender.try_send(super::Outbound {
            bytes: frame.freeze(),
            _permit: None,
        }) {
            Ok(()) | Err(TrySendError::Closed(_)) => {}
            Err(TrySendError::Full(_)) => overflowed.store(true, Ordering::Relaxed),
        }
    };
    let id = target.cache.add_listener(options, handler);
    listeners.by_id.lock().insert(
        (connection.id, listener_id.to_vec()),
        Registered {
            connection: connection.id,
            cache: target.cache.clone(),
            id,
        },
    );
    if include_current_state && kinds_of(interests).contains(CoreKind::Created) {
        state_events(
            out,
            frame,
            target,
            &shared_id,
            filter.as_ref(),
            target.cache.iter(),
        )?;
    }
    Ok(filter)
}

/// Appends a created event, carrying the request's message id, for each of `entries`
/// (include-current-state).
fn state_events(
    out: &mut BytesMut,
    frame: &Frame,
    target: &Target,
    listener_id: &[u8],
    filter: Option<&EventFilter>,
    entries: impl IntoIterator<Item = weft_core::CacheEntry>,
) -> Result<(), Failure> {
    for entry in entries {
        if let Some(filter) = filter {
            let event = CacheEvent::current_state(Arc::from(target.cache.name()), entry.clone());
            if !filter(&event) {
                continue;
            }
        }
        let key = target.key_out(entry.key())?;
        write_event(
            out,
            frame.header.message_id,
            EventKind::Created,
            listener_id,
            &key,
            entry.version(),
            false,
        );
    }
    Ok(())
}

/// Serves ADD_CLIENT_LISTENER with include-current-state on a clustered cache: the listener
/// is registered at once (it sees every write from then on, wherever applied), then the
/// current state is read from the members that read each segment — off the connection's
/// reading loop — and its created events and the response go through the outbound queue.
/// False for any other request (served as usual).
pub(super) fn add_with_cluster_state(connection: &Arc<Connection>, frame: &Frame) -> bool {
    let weft_hotrod::Request::AddClientListener {
        listener_id,
        include_current_state: true,
        filter,
        converter: None,
        interests,
        ..
    } = &frame.request
    else {
        return false;
    };
    let Some(node) = connection.context.cluster.clone() else {
        return false;
    };
    let Some(cache) = super::ops::lookup(connection, frame.cache_name()) else {
        return false;
    };
    if !cache.config().mode.is_clustered() {
        return false;
    }
    let target = Target::new(cache.clone(), frame);
    let connection = Arc::clone(connection);
    let (listener_id, interests) = (*listener_id, *interests);
    let source = source_filter(frame, filter.as_ref());
    let frame = frame.clone();
    tokio::spawn(async move {
        let listener_id = frame.slice(listener_id);
        let mut out = BytesMut::new();
        let mut response = add(
            &connection,
            &frame,
            &target,
            listener_id,
            false,
            interests,
            source,
            &mut out,
        );
        if let Ok(filter) = &response
            && kinds_of(interests).contains(CoreKind::Created)
        {
            response = current_state(
                &node,
                &frame,
                &target,
                listener_id,
                filter.as_ref(),
                &mut out,
            )
            .await
            .map(|()| None);
        }
        let response = response.map(|_| {
            super::ops::header(&mut out, &connection, &frame, &cache, Status::Success);
            out
        });
        super::ops::send_later(&connection, &frame, response).await;
    });
    true
}

/// Appends a created event, carrying the request's message id, for every entry of the
/// clustered cache, each segment read from the member that reads it now.
async fn current_state(
    node: &Node,
    frame: &Frame,
    target: &Target,
    listener_id: &[u8],
    filter: Option<&EventFilter>,
    out: &mut BytesMut,
) -> Result<(), Failure> {
    let cache = &target.cache;
    let mut cursor = SegmentCursor::new(cache.clone(), 0..cache.segment_count());
    loop {
        let (entries, finished) = cursor
            .next_batch(node, PAGE_MAX, |_| true)
            .await
            .map_err(|error| Failure::server(format!("{error:#}")))?;
        if entries.is_empty() && finished.is_empty() {
            return Ok(());
        }
        state_events(out, frame, target, listener_id, filter, entries)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the interest mask maps to kinds, and 0 (old clients) means all four.
    #[test]
    fn interests() {
        let near_cache = kinds_of(0x0e);
        assert!(!near_cache.contains(CoreKind::Created));
        assert!(near_cache.contains(CoreKind::Modified));
        assert!(near_cache.contains(CoreKind::Removed));
        assert!(near_cache.contains(CoreKind::Expired));
        assert!(kinds_of(0).contains(CoreKind::Created));
        assert!(!kinds_of(0).contains(CoreKind::Evicted));
    }
}
