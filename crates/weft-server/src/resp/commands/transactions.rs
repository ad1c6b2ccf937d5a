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
    match where_it_runs(session, &multi, &watched) {
        Ok(None) => {}
        Ok(Some(key)) => {
            // Every key lives on one other member: the transaction runs there, atomically,
            // with its watched keys checked there (see `resp::run_at_owner`).
            let watched = watched.into_iter().map(|(_, _, k, v)| (k, v)).collect();
            session.transaction_elsewhere = Some((multi, watched));
            session.forward = Some(crate::resp::session::Elsewhere {
                key,
                write: true,
                args: vec![Bytes::from_static(b"EXEC")],
            });
            return;
        }
        Err(error) => {
            return reply.error(&format!(
                "EXECABORT Transaction discarded because of: {error}"
            ));
        }
    }
    for (cache, database, key, version) in &watched {
        if touched(session, cache, *database, key, *version) {
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

/// Whether a key WATCHed in `database` of `cache` at `version` (`None`: absent) changed
/// since: its version differs — or SWAPDB gave the database another cache since, and the
/// key lived in the one swapped away or lives in the one swapped in. As in Redis, a swap
/// that only moves an expired key in or out touches nothing.
fn touched(
    session: &Session,
    cache: &weft_core::Cache,
    database: u32,
    key: &[u8],
    version: Option<u64>,
) -> bool {
    let now = |cache: &weft_core::Cache| cache.get_entry(key).ok().flatten().map(|e| e.version());
    match session.context.manager.cache_for_resp_database(database) {
        Some(serving) if serving.name() != cache.name() => {
            version.is_some() || now(&serving).is_some()
        }
        _ => now(cache) != version,
    }
}

/// Where a transaction runs on a clustered cache: here (`None`), or at the member that owns
/// every key it names and watches (`Some` of a key naming that member); an error, as Redis
/// Cluster's CROSSSLOT, when its keys live on different members.
fn where_it_runs(
    session: &Session,
    multi: &Multi,
    watched: &[(weft_core::Cache, u32, Bytes, Option<u64>)],
) -> Result<Option<Bytes>, &'static str> {
    use weft_grid::routing::Route;
    const CROSSSLOT: &str = "CROSSSLOT Keys in request don't hash to the same slot";
    if session.forwarded || !session.cache.config().mode.is_clustered() {
        return Ok(None);
    }
    let mut found: Option<(Route, Bytes)> = None;
    let mut visit = |route: Route, key: &Bytes| -> Result<(), &'static str> {
        match &found {
            None => found = Some((route, key.clone())),
            Some((seen, _)) if *seen == route => {}
            Some(_) => return Err(CROSSSLOT),
        }
        Ok(())
    };
    let watch = crate::resp::table::lookup(b"watch");
    for (_, _, key, _) in watched {
        let args = [Bytes::from_static(b"WATCH"), key.clone()];
        if let Some(spec) = watch
            && let Some(route) = session.route_of(spec, &args)
        {
            visit(route.ok_or(CROSSSLOT)?, key)?;
        }
    }
    for args in &multi.queued {
        let Some(spec) = args
            .first()
            .and_then(|name| crate::resp::table::lookup(name))
        else {
            continue;
        };
        if let Some(route) = session.route_of(spec, args) {
            let key = usize::try_from(spec.first_key)
                .ok()
                .and_then(|at| args.get(at))
                .cloned()
                .unwrap_or_default();
            visit(route.ok_or(CROSSSLOT)?, &key)?;
        }
    }
    Ok(match found {
        Some((Route::Remote(..), key)) => Some(key),
        _ => None,
    })
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
            .any(|(c, _, k, _)| c.name() == cache.name() && k == key)
        {
            // A copy: the argument is a slice of the connection's input buffer.
            let database = session.database;
            session
                .watched
                .push((cache, database, Bytes::copy_from_slice(key), version));
        }
    }
    reply.ok();
}

/// `UNWATCH`
pub fn unwatch(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    session.watched.clear();
    reply.ok();
}
