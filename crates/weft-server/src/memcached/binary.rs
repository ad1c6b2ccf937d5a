//! Binary-protocol requests against the cache, answered as memcached 1.6 answers them:
//! quiet opcodes are silent on success (GETQ/GETKQ/GATQ/GATKQ on a miss), errors are always
//! sent, and every response echoes the opcode and opaque.

use bytes::BytesMut;
use weft_core::{CacheEntry, CacheError};
use weft_memcached::binary::{
    BinaryCommand, ResponseHeader, Status, StoreMode as BinaryStoreMode, write_error,
    write_response,
};
use weft_memcached::{BinaryRequest, MEMCACHED_VERSION};

use super::ops::{Delta, Outcome, StoreMode};
use super::stats::{self, Group, bump};
use super::{Connection, STRUCTURE_MESSAGE};

/// INCR/DECR expiration meaning "do not create the key: fail if absent".
const NO_CREATE_EXPTIME: u32 = 0xffff_ffff;

/// Runs `request`, appending its responses (none for a quiet success).
pub(crate) fn execute(connection: &mut Connection, request: &BinaryRequest, out: &mut BytesMut) {
    let reply = Reply {
        opcode: request.opcode,
        opaque: request.opaque,
    };
    let quiet = request.is_quiet();
    match &request.command {
        BinaryCommand::SaslListMechs => {
            let mechanisms = connection
                .context
                .security
                .sasl_mechanisms(&connection.offer)
                .join(" ");
            if mechanisms.is_empty() {
                reply.error(out, Status::UnknownCommand);
            } else {
                reply.respond(out, Status::NoError, 0, &[], &[], mechanisms.as_bytes());
            }
            return;
        }
        BinaryCommand::Sasl {
            mechanism,
            data,
            step,
        } => return sasl(connection, out, reply, mechanism, data, *step),
        BinaryCommand::Version => {}
        _ if !connection.authenticated => {
            reply.error(out, Status::AuthError);
            return;
        }
        _ => {}
    }
    if let Err(denied) = connection.authorize(
        crate::authorization::memcached_binary(&request.command),
        "binary",
    ) {
        reply.respond(out, Status::AuthError, 0, &[], &[], denied.as_bytes());
        return;
    }
    match &request.command {
        BinaryCommand::Get {
            key,
            with_key,
            quiet,
        } => {
            let found = connection.store().retrieve(key);
            hit_or_miss(connection, out, reply, found, key, *with_key, *quiet, true);
        }
        BinaryCommand::GetAndTouch {
            key,
            exptime,
            with_key,
            quiet,
        } => {
            let found = connection.store().touch(key, i64::from(*exptime));
            hit_or_miss(connection, out, reply, found, key, *with_key, *quiet, true);
        }
        BinaryCommand::Touch { key, exptime } => {
            let found = connection.store().touch(key, i64::from(*exptime));
            hit_or_miss(connection, out, reply, found, key, false, false, false);
        }
        BinaryCommand::Store {
            mode,
            key,
            value,
            flags,
            exptime,
            ..
        } => {
            // Any store with a CAS is a compare-and-swap, as in memcached.
            let store_mode = if request.cas != 0 {
                StoreMode::Cas(request.cas)
            } else {
                match mode {
                    BinaryStoreMode::Set => StoreMode::Set,
                    BinaryStoreMode::Add => StoreMode::Add,
                    BinaryStoreMode::Replace => StoreMode::Replace,
                }
            };
            let outcome =
                connection
                    .store()
                    .store(store_mode, key, value, *flags, i64::from(*exptime));
            // memcached's statuses for "not stored": exists for add, not found for replace.
            let not_stored = match store_mode {
                StoreMode::Add => Status::KeyExists,
                StoreMode::Replace => Status::KeyNotFound,
                _ => Status::ItemNotStored,
            };
            stored(connection, out, reply, outcome, quiet, not_stored);
        }
        BinaryCommand::Concat {
            append, key, value, ..
        } => {
            let mode = StoreMode::Concat {
                append: *append,
                cas: request.cas,
            };
            let outcome = connection.store().store(mode, key, value, 0, 0);
            stored(
                connection,
                out,
                reply,
                outcome,
                quiet,
                Status::ItemNotStored,
            );
        }
        BinaryCommand::Delete { key, .. } => match connection.store().delete(key, request.cas) {
            Ok(Outcome::Stored) => {
                if !quiet {
                    reply.empty(out, 0);
                }
            }
            Ok(outcome) => reply.error(out, status_of(outcome, Status::ItemNotStored)),
            Err(error) => cache_error(connection, out, reply, &error),
        },
        BinaryCommand::Arithmetic {
            incr,
            key,
            delta,
            initial,
            exptime,
            ..
        } => {
            let create = (*exptime != NO_CREATE_EXPTIME).then_some((*initial, i64::from(*exptime)));
            match connection
                .store()
                .arithmetic(key, *incr, *delta, create, request.cas)
            {
                Ok(Delta::Value(value) | Delta::Created(value)) => {
                    if !quiet {
                        let cas = connection.store().written_cas();
                        reply.respond(out, Status::NoError, cas, &[], &[], &value.to_be_bytes());
                    }
                }
                Ok(Delta::NotFound) => reply.error(out, Status::KeyNotFound),
                Ok(Delta::NonNumeric) => reply.error(out, Status::NonNumeric),
                Ok(Delta::Exists) => reply.error(out, Status::KeyExists),
                Ok(Delta::Structure) => reply.structure(out),
                Err(error) => cache_error(connection, out, reply, &error),
            }
        }
        BinaryCommand::Quit { .. } => {
            if !quiet {
                reply.empty(out, 0);
            }
            connection.quit = true;
        }
        BinaryCommand::Flush { exptime, .. } => {
            match connection.flush_all(i64::from(exptime.unwrap_or(0))) {
                Ok(()) => {
                    if !quiet {
                        reply.empty(out, 0);
                    }
                }
                Err(error) => cache_error(connection, out, reply, &error),
            }
        }
        BinaryCommand::Noop => reply.empty(out, 0),
        BinaryCommand::Version => {
            reply.respond(
                out,
                Status::NoError,
                0,
                &[],
                &[],
                MEMCACHED_VERSION.as_bytes(),
            );
        }
        BinaryCommand::Stat { group } => stat(connection, out, reply, group),
        BinaryCommand::Verbosity { level } => {
            connection.set_verbosity(*level);
            reply.empty(out, 0);
        }
        BinaryCommand::TooLarge { key, set } => match connection.store().too_large(*set, key) {
            Ok(()) => reply.error(out, Status::ValueTooLarge),
            Err(error) => cache_error(connection, out, reply, &error),
        },
        // SASL and opcodes Weft does not serve; also any the codec learns later.
        _ => reply.error(out, Status::UnknownCommand),
    }
}

use crate::security::SaslStep;

/// SASL_AUTH starts an exchange (replacing any in progress), SASL_STEP continues it: `0x21`
/// (continue) with the challenge, success with `Authenticated`, or `0x20` (auth error). PLAIN
/// is offered on memcached whatever the transport, as memcached offers it. Without users,
/// "unknown command", as memcached without SASL.
fn sasl(
    connection: &mut Connection,
    out: &mut BytesMut,
    reply: Reply,
    mechanism: &[u8],
    data: &[u8],
    step: bool,
) {
    if !connection.context.security.required() {
        // As memcached without SASL answers.
        reply.error(out, Status::UnknownCommand);
        return;
    }
    // A request run again after waiting for the throttle continues its exchange.
    let resumed = connection.auth_wait_resumes;
    connection.auth_wait_resumes = false;
    if !step && !resumed {
        let name = String::from_utf8_lossy(mechanism);
        connection.sasl = connection
            .context
            .security
            .start_sasl(connection.peer.ip(), "memcached", &name, &connection.offer)
            .ok();
    }
    let Some(exchange) = connection.sasl.as_mut() else {
        reply.error(out, Status::AuthError);
        return;
    };
    match exchange.step(data) {
        SaslStep::Continue(challenge) => {
            reply.respond(out, Status::AuthContinue, 0, &[], &[], &challenge);
        }
        SaslStep::Done { subject, .. } => {
            connection.sasl = None;
            connection.subject = Some(subject);
            connection.authenticated = true;
            reply.respond(out, Status::NoError, 0, &[], &[], b"Authenticated");
        }
        SaslStep::Failed(_) => {
            connection.sasl = None;
            reply.error(out, Status::AuthError);
        }
        // The connection loop waits, then runs this request again (a SASL_AUTH starts its
        // exchange anew then: its one message is the credential).
        SaslStep::Wait(due) => {
            connection.auth_wait = Some(due);
            connection.auth_wait_resumes = true;
        }
        SaslStep::Throttled(message) => {
            connection.sasl = None;
            reply.respond(out, Status::AuthError, 0, &[], &[], message.as_bytes());
        }
    }
}

/// Where a response goes: the request's opcode and opaque.
#[derive(Debug, Clone, Copy)]
struct Reply {
    opcode: u8,
    opaque: u32,
}

impl Reply {
    fn respond(
        self,
        out: &mut BytesMut,
        status: Status,
        cas: u64,
        extras: &[u8],
        key: &[u8],
        value: &[u8],
    ) {
        let header = ResponseHeader {
            opcode: self.opcode,
            status,
            opaque: self.opaque,
            cas,
        };
        write_response(out, &header, extras, key, value);
    }

    fn empty(self, out: &mut BytesMut, cas: u64) {
        self.respond(out, Status::NoError, cas, &[], &[], &[]);
    }

    fn error(self, out: &mut BytesMut, status: Status) {
        write_error(out, self.opcode, self.opaque, status);
    }

    /// A write that met a Redis data structure.
    fn structure(self, out: &mut BytesMut) {
        self.respond(
            out,
            Status::NotSupported,
            0,
            &[],
            &[],
            STRUCTURE_MESSAGE.as_bytes(),
        );
    }
}

/// A GET/GAT/TOUCH answer. A hit carries the flags as extras and the CAS; GET and GAT carry
/// the value (and the key for the K forms), TOUCH does not. A miss is silent for quiet forms;
/// otherwise the K forms answer "not found" with the key and no text, the others with the
/// standard text.
#[allow(clippy::too_many_arguments)]
fn hit_or_miss(
    connection: &Connection,
    out: &mut BytesMut,
    reply: Reply,
    found: Result<Option<CacheEntry>, CacheError>,
    key: &[u8],
    with_key: bool,
    quiet: bool,
    with_value: bool,
) {
    match found {
        Ok(Some(entry)) => {
            let flags = entry.user_flags().to_be_bytes();
            let key = if with_key { key } else { &[] };
            let value = if with_value { entry.value() } else { &[] };
            reply.respond(out, Status::NoError, entry.version(), &flags, key, value);
        }
        Ok(None) if quiet => {}
        Ok(None) if with_key => {
            reply.respond(out, Status::KeyNotFound, 0, &[], key, &[]);
        }
        Ok(None) => reply.error(out, Status::KeyNotFound),
        Err(error) => cache_error(connection, out, reply, &error),
    }
}

/// The answer to a store: empty with the new CAS on success (silent if quiet), else the
/// status of the outcome.
fn stored(
    connection: &Connection,
    out: &mut BytesMut,
    reply: Reply,
    outcome: Result<Outcome, CacheError>,
    quiet: bool,
    not_stored: Status,
) {
    match outcome {
        Ok(Outcome::Stored) => {
            if !quiet {
                let cas = connection.store().written_cas();
                reply.empty(out, cas);
            }
        }
        Ok(Outcome::Structure) => reply.structure(out),
        Ok(outcome) => reply.error(out, status_of(outcome, not_stored)),
        Err(error) => cache_error(connection, out, reply, &error),
    }
}

fn status_of(outcome: Outcome, not_stored: Status) -> Status {
    match outcome {
        Outcome::Stored => Status::NoError,
        Outcome::NotStored => not_stored,
        Outcome::Exists => Status::KeyExists,
        Outcome::NotFound => Status::KeyNotFound,
        Outcome::Structure => Status::NotSupported,
    }
}

/// STAT: one response per statistic (key = name, value = value), then an empty one.
fn stat(connection: &Connection, out: &mut BytesMut, reply: Reply, group: &[u8]) {
    if group == b"reset" {
        connection.context.memcached.counters.reset();
        reply.empty(out, 0);
        return;
    }
    let Some(group) = Group::parse(group) else {
        reply.error(out, Status::KeyNotFound);
        return;
    };
    for (name, value) in stats::collect(&group, &connection.context, &connection.cache) {
        reply.respond(out, Status::NoError, 0, &[], name.as_bytes(), &value);
    }
    reply.empty(out, 0);
}

/// A failure of the cache itself: out of memory when full, else an internal error with the
/// reason as the body.
fn cache_error(connection: &Connection, out: &mut BytesMut, reply: Reply, error: &CacheError) {
    if matches!(error, CacheError::ContainerFull { .. }) {
        bump(&connection.context.memcached.counters.store_no_memory);
        reply.error(out, Status::OutOfMemory);
    } else {
        reply.respond(
            out,
            Status::InternalError,
            0,
            &[],
            &[],
            error.to_string().as_bytes(),
        );
    }
}
