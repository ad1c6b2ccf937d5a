//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH, with Redis' semantics.
//!
//! MULTI queues commands (`+QUEUED`); a command refused while queueing (unknown, wrong
//! arity) makes EXEC answer `EXECABORT`; errors while running appear inside EXEC's reply.
//! EXEC runs the queue with the server's transaction gate held exclusively, so no other RESP
//! command runs in between. WATCH remembers each key's version: EXEC answers a null array
//! if any watched key has another version (or appeared, or went) — whatever protocol
//! changed it. Writes through Hot Rod, REST or memcached do not take the gate, so they can
//! land between EXEC's check and its commands (WATCH still sees those made before EXEC).
//! Limitation: a key created and deleted again after WATCH reads as unchanged.

use bytes::Bytes;

use super::strings::cache_error;
use crate::resp::session::Multi;
use crate::resp::{Reply, Session};

/// `MULTI`
pub fn multi(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    if session.multi.is_some() {
        return reply.error("ERR MULTI calls can not be nested");
    }
    session.multi = Some(Multi::default());
    reply.ok();
}

/// `DISCARD`
pub fn discard(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    if session.multi.take().is_none() {
        return reply.error("ERR DISCARD without MULTI");
    }
    session.watched.clear();
    reply.ok();
}

/// `EXEC`
pub fn exec(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(multi) = session.multi.take() else {
        return reply.error("ERR EXEC without MULTI");
    };
    let watched = std::mem::take(&mut session.watched);
    if multi.failed {
        return reply.error("EXECABORT Transaction discarded because of previous errors.");
    }
    for (cache, key, version) in &watched {
        let now = cache.get_entry(key).ok().flatten().map(|e| e.version());
        if now != *version {
            return reply.null_array();
        }
    }
    reply.array(multi.queued.len());
    session.executing = true;
    for args in &multi.queued {
        session.dispatch_queued(args, reply);
    }
    session.executing = false;
}

/// `WATCH key [key ...]`
pub fn watch(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if session.multi.is_some() {
        return reply.error("ERR WATCH inside MULTI is not allowed");
    }
    for key in &args[1..] {
        let version = match session.cache.get_entry(key) {
            Ok(entry) => entry.map(|e| e.version()),
            Err(error) => return cache_error(reply, &error),
        };
        let cache = session.cache.clone();
        if !session
            .watched
            .iter()
            .any(|(c, k, _)| c.name() == cache.name() && k == key)
        {
            // A copy: the argument is a slice of the connection's input buffer.
            session
                .watched
                .push((cache, Bytes::copy_from_slice(key), version));
        }
    }
    reply.ok();
}

/// `UNWATCH`
pub fn unwatch(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    session.watched.clear();
    reply.ok();
}
