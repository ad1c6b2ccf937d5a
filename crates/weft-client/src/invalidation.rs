//! The near cache's invalidation stream: a listener for modified, removed and expired events
//! on every server of the cache's topology (each event is raised by the server that applies
//! the write, synchronously, on the connection of every listener registered there), and a
//! PING on each of those connections every heartbeat interval. A server writes the events it
//! queued before reading a request ahead of that request's answer, so an answered PING sent
//! at `s` confirms that every invalidation the server raised before `s` has been applied
//! (events are applied on the connection's reader before the PING's answer is handed over).
//!
//! The loop: register everywhere (the stream is incomplete until every registration is
//! acknowledged), mark the stream complete, then confirm each server at each heartbeat. A
//! connection that breaks, a PING that fails, or a topology update that changes the server
//! list interrupts the stream, and it starts over with fresh registrations.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use weft_hotrod::{Event, Request, Status};

use crate::cache::CacheContext;
use crate::connection::EventHandler;
use crate::listener::{INVALIDATION_INTERESTS, random_id, register, stop_requested};
use crate::near::NearCache;

/// Longest pause between attempts to re-establish the stream.
const RESTART_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Keeps the near cache's invalidation stream going until `stopped` turns true.
pub(crate) async fn run(
    context: Arc<CacheContext>,
    near: Arc<NearCache>,
    mut stopped: watch::Receiver<bool>,
) {
    let heartbeat = near.config().heartbeat_interval;
    let mut backoff = context.retry_backoff;
    let handler: EventHandler = {
        let near = Arc::clone(&near);
        Arc::new(move |event: Event| {
            if let Some(key) = &event.key {
                near.invalidate(key, true);
            } else {
                // A custom event names no key: nothing can be kept.
                near.clear();
            }
        })
    };
    loop {
        near.interrupt();
        let servers = context.routing.servers();
        let id = random_id();
        let mut connections = Vec::with_capacity(servers.len());
        for &server in &servers {
            match register(
                &context,
                server,
                &id,
                INVALIDATION_INTERESTS,
                false,
                Arc::clone(&handler),
            )
            .await
            {
                Ok(connection) => connections.push(connection),
                Err(error) => {
                    tracing::debug!(%server, %error, "near cache listener not registered; the near cache serves only its own bound until it is");
                    break;
                }
            }
        }
        if connections.len() == servers.len() && servers == context.routing.servers() {
            let epoch = near.complete(servers);
            backoff = context.retry_backoff;
            let mut ticker = tokio::time::interval(heartbeat);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            'beat: loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    () = stop_requested(&mut stopped) => {
                        close_all(&connections);
                        return;
                    }
                }
                let sent_at = Instant::now();
                let mut pings = JoinSet::new();
                for connection in &connections {
                    let connection = Arc::clone(connection);
                    let header = context.header(0);
                    pings.spawn(async move {
                        let reply = connection.call(header, &Request::<&[u8]>::Ping).await;
                        (connection.address(), reply)
                    });
                }
                let mut interrupted = false;
                while let Some(joined) = pings.join_next().await {
                    let Ok((server, reply)) = joined else {
                        interrupted = true;
                        continue;
                    };
                    match reply {
                        Ok(reply) if reply.header.status == Status::Success => {
                            let servers_changed = reply
                                .header
                                .topology
                                .as_ref()
                                .is_some_and(|topology| context.routing.update(topology));
                            if servers_changed {
                                interrupted = true;
                            } else {
                                near.confirm(epoch, server, sent_at);
                            }
                        }
                        other => {
                            tracing::debug!(%server, ?other, "near cache heartbeat failed; restarting the invalidation stream");
                            interrupted = true;
                        }
                    }
                }
                if interrupted {
                    break 'beat;
                }
            }
        } else {
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop_requested(&mut stopped) => {
                    close_all(&connections);
                    return;
                }
            }
            backoff = (backoff * 2).min(RESTART_BACKOFF_MAX);
        }
        // The server drops a closed connection's listeners.
        close_all(&connections);
    }
}

fn close_all(connections: &[Arc<crate::connection::Connection>]) {
    for connection in connections {
        connection.close("near cache invalidation stream restarted");
    }
}
