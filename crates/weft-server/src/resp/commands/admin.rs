//! SHUTDOWN and WAIT: stopping the server from a Redis client, and asking how many copies of
//! the client's writes the cluster holds.

use bytes::Bytes;

use super::lists::{Block, TimeoutReply, deadline_after};
use crate::resp::{Reply, Session};

/// `SHUTDOWN [NOSAVE | SAVE] [NOW] [FORCE] [ABORT]`: stops the server gracefully, as SIGTERM
/// does (clients are told, stores flushed and synced, the cluster left), and closes this
/// connection without a reply, as Redis does. Weft's stores are written as entries change,
/// so SAVE and NOSAVE make no difference; NOW and FORCE are accepted (there is no replica to
/// wait for). With no shutdown ever in progress, ABORT is an error.
///
/// Without a users file, only a client at `127.0.0.1` or `::1` may (the REST API's rule for
/// its stop action); with one, users with the `LIFECYCLE` permission.
pub fn shutdown(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (mut save, mut nosave, mut abort) = (false, false, false);
    for argument in &args[1..] {
        match argument.to_ascii_lowercase().as_slice() {
            b"save" => save = true,
            b"nosave" => nosave = true,
            b"now" | b"force" => {}
            b"abort" => abort = true,
            _ => return reply.error("ERR syntax error"),
        }
    }
    if (save && nosave) || (abort && args.len() > 2) {
        return reply.error("ERR syntax error");
    }
    if abort {
        return reply.error("ERR No shutdown in progress.");
    }
    if session.in_script || session.in_transaction() {
        return reply.error("ERR SHUTDOWN is not allowed in scripts or transactions");
    }
    if !session.context.security.required() && !weft_rest::is_local_client(session.peer) {
        return reply.error(
            "ERR SHUTDOWN is accepted from 127.0.0.1 or ::1 only, on a server that asks no password",
        );
    }
    tracing::info!(client = %session.peer, "SHUTDOWN asked by a RESP client");
    session.context.request_shutdown();
    // No reply: the connection closes as the server stops.
    session.quit = true;
}

/// `WAIT numreplicas timeout`: the number of other members holding every write this client
/// made to the selected database, once it reaches `numreplicas`, or when `timeout`
/// milliseconds have passed (0: no limit).
///
/// A local cache has no replicas: 0. A clustered cache with synchronous replication has
/// acknowledged each write only once every owner applied it, so its backups — owners less
/// one, or every other member for a replicated cache — hold them all, now. With
/// asynchronous replication a write is acknowledged first; WAIT counts no replica then.
/// Inside MULTI or a script it answers at once, as Redis does.
pub fn wait(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(wanted) = weft_resp::parse_i64_strict(&args[1]) else {
        return reply.error("ERR value is not an integer or out of range");
    };
    let Some(timeout) = weft_resp::parse_i64_strict(&args[2]) else {
        return reply.error("ERR timeout is not an integer or out of range");
    };
    if timeout < 0 {
        return reply.error("ERR timeout is negative");
    }
    let replicas = replicas_holding_writes(session);
    if replicas >= wanted || session.in_transaction() || session.in_script {
        return reply.integer(replicas);
    }
    // Nothing will add a replica while this client waits: it is answered at its deadline.
    let deadline = match &session.block_retry {
        Some(retry) => retry.deadline,
        None => deadline_after(timeout.unsigned_abs()),
    };
    let mut block = Block::new(Vec::new(), deadline);
    block.on_timeout = TimeoutReply::Integer(replicas);
    session.blocked = Some(block);
}

/// The members other than this one that hold every acknowledged write to the session's
/// cache (see [`wait`]).
fn replicas_holding_writes(session: &Session) -> i64 {
    let config = session.cache.config();
    if config.replication != weft_core::Replication::Sync {
        return 0;
    }
    let Some(node) = &session.context.cluster else {
        return 0;
    };
    let Some(route) = node.routing().cache(session.cache.name()) else {
        return 0;
    };
    let members = route.topology.members().len();
    let copies = match config.mode {
        weft_core::CacheMode::Distributed => members.min(config.owners as usize),
        weft_core::CacheMode::Replicated => members,
        // Local, and any mode a later version adds: no replica counted.
        _ => return 0,
    };
    i64::try_from(copies.saturating_sub(1)).unwrap_or(0)
}
