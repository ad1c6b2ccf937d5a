//! Text-protocol requests against the cache: one function per command family, replies
//! written with `weft_memcached::text`'s writers.

use bytes::BytesMut;
use weft_core::CacheError;
use weft_memcached::text::{
    self, GetKind, Status, StoreMode as TextStoreMode, TextCommand, TextError,
};
use weft_memcached::{MEMCACHED_VERSION, TextRequest};

use super::ops::{Delta, Outcome, StoreMode};
use super::stats::{self, Group, bump};
use super::{Connection, Progress, STRUCTURE_MESSAGE};

/// Runs `request`; a retrieval resumes at key `resume` and stops early (returning
/// [`Progress::More`]) when the output has grown past what the loop writes at once.
pub(crate) fn execute(
    connection: &mut Connection,
    request: &TextRequest,
    resume: usize,
    out: &mut BytesMut,
) -> Progress {
    let start = out.len();
    if !connection.authenticated {
        login(connection, request, out);
        return Progress::Done;
    }
    if let Err(denied) = connection.authorize(
        crate::authorization::memcached_text(&request.command),
        crate::authorization::memcached_text_name(&request.command),
    ) {
        text::write_client_error(out, &denied);
        return Progress::Done;
    }
    match &request.command {
        TextCommand::Get { kind, keys } => return retrieve(connection, *kind, keys, resume, out),
        TextCommand::Store {
            mode,
            key,
            flags,
            exptime,
            value,
        } => {
            let mode = match mode {
                TextStoreMode::Set => StoreMode::Set,
                TextStoreMode::Add => StoreMode::Add,
                TextStoreMode::Replace => StoreMode::Replace,
                TextStoreMode::Append => StoreMode::Concat {
                    append: true,
                    cas: 0,
                },
                TextStoreMode::Prepend => StoreMode::Concat {
                    append: false,
                    cas: 0,
                },
                TextStoreMode::Cas(unique) => StoreMode::Cas(*unique),
            };
            match connection
                .store()
                .store(mode, key, value, *flags, i64::from(*exptime))
            {
                Ok(outcome) => write_outcome(out, outcome, Status::Stored),
                Err(error) => write_cache_error(connection, out, &error),
            }
        }
        TextCommand::TooLarge { mode, key } => {
            match connection
                .store()
                .too_large(matches!(mode, TextStoreMode::Set), key)
            {
                Ok(()) => text::write_error(out, TextError::ObjectTooLarge),
                Err(error) => write_cache_error(connection, out, &error),
            }
        }
        TextCommand::Delete { key } => match connection.store().delete(key, 0) {
            Ok(outcome) => write_outcome(out, outcome, Status::Deleted),
            Err(error) => write_cache_error(connection, out, &error),
        },
        TextCommand::Arithmetic { incr, key, delta } => {
            match connection.store().arithmetic(key, *incr, *delta, None, 0) {
                Ok(Delta::Value(value) | Delta::Created(value)) => text::write_number(out, value),
                Ok(Delta::NotFound | Delta::Exists) => text::write_status(out, Status::NotFound),
                Ok(Delta::NonNumeric) => text::write_error(out, TextError::NonNumeric),
                Ok(Delta::Structure) => text::write_server_error(out, STRUCTURE_MESSAGE),
                Err(error) => write_cache_error(connection, out, &error),
            }
        }
        TextCommand::Touch { key, exptime } => {
            match connection.store().touch(key, i64::from(*exptime)) {
                Ok(Some(_)) => text::write_status(out, Status::Touched),
                Ok(None) => text::write_status(out, Status::NotFound),
                Err(error) => write_cache_error(connection, out, &error),
            }
        }
        TextCommand::FlushAll { delay } => match connection.flush_all(i64::from(*delay)) {
            Ok(()) => text::write_status(out, Status::Ok),
            Err(error) => write_cache_error(connection, out, &error),
        },
        TextCommand::Version => text::write_version(out, MEMCACHED_VERSION),
        TextCommand::Verbosity { level } => {
            connection.set_verbosity(*level);
            text::write_status(out, Status::Ok);
        }
        TextCommand::Stats { group, argument } => {
            stats_command(connection, group.as_deref(), argument.as_deref(), out);
        }
        TextCommand::Quit => connection.quit = true,
        TextCommand::Rejected(error) => text::write_error(out, *error),
        // Commands added to the codec later are unknown here.
        _ => text::write_error(out, TextError::Error),
    }
    if request.noreply {
        out.truncate(start);
    }
    Progress::Done
}

/// `get`/`gets`/`gat`/`gats`: a `VALUE` block per hit, then `END`.
fn retrieve(
    connection: &Connection,
    kind: GetKind,
    keys: &weft_memcached::text::Keys,
    resume: usize,
    out: &mut BytesMut,
) -> Progress {
    let store = connection.store();
    for (index, key) in keys.iter().enumerate().skip(resume) {
        let found = match kind.touch() {
            Some(exptime) => store.touch(key, i64::from(exptime)),
            None => store.retrieve(key),
        };
        match found {
            Ok(Some(entry)) => {
                let cas = kind.returns_cas().then(|| entry.version());
                text::write_value(out, key, entry.user_flags(), entry.value(), cas);
            }
            Ok(None) => {}
            Err(error) => {
                write_cache_error(connection, out, &error);
                return Progress::Done;
            }
        }
        if out.len() >= super::OUTPUT_FLUSH_BYTES {
            return Progress::More(index + 1);
        }
    }
    text::write_end(out);
    Progress::Done
}

/// `stats [group]`.
fn stats_command(
    connection: &Connection,
    group: Option<&[u8]>,
    argument: Option<&[u8]>,
    out: &mut BytesMut,
) {
    match group {
        Some(b"reset") => {
            connection.context.memcached.counters.reset();
            text::write_status(out, Status::Reset);
            return;
        }
        Some(b"detail") => {
            // Per-prefix statistics are not kept; on/off are accepted, dump is empty.
            match argument {
                Some(b"on" | b"off") => text::write_status(out, Status::Ok),
                Some(b"dump") => text::write_end(out),
                _ => text::write_error(out, TextError::StatsDetailUsage),
            }
            return;
        }
        _ => {}
    }
    let Some(group) = Group::parse(group.unwrap_or_default()) else {
        text::write_error(out, TextError::Error);
        return;
    };
    for (name, value) in stats::collect(&group, &connection.context, &connection.cache) {
        text::write_stat(out, &name, &value);
    }
    text::write_end(out);
}

/// The reply line of a storage or delete outcome; `success` is `STORED` or `DELETED`.
fn write_outcome(out: &mut BytesMut, outcome: Outcome, success: Status) {
    match outcome {
        Outcome::Stored => text::write_status(out, success),
        Outcome::NotStored => text::write_status(out, Status::NotStored),
        Outcome::Exists => text::write_status(out, Status::Exists),
        Outcome::NotFound => text::write_status(out, Status::NotFound),
        Outcome::Structure => text::write_server_error(out, STRUCTURE_MESSAGE),
    }
}

/// A failure of the cache itself, as a `SERVER_ERROR` line.
fn write_cache_error(connection: &Connection, out: &mut BytesMut, error: &CacheError) {
    if matches!(error, CacheError::ContainerFull { .. }) {
        bump(&connection.context.memcached.counters.store_no_memory);
        text::write_error(out, TextError::OutOfMemory);
    } else {
        text::write_server_error(out, &error.to_string());
    }
}

use crate::security::Login;

/// memcached 1.6's text-protocol authentication: before anything else, a client sends
/// `set <any key> <flags> <exptime> <bytes>` with `<user> <password>` as the data, answered
/// `STORED` when they are right. Any other command first is answered
/// `CLIENT_ERROR unauthenticated`.
fn login(connection: &mut Connection, request: &TextRequest, out: &mut BytesMut) {
    let TextCommand::Store {
        mode: TextStoreMode::Set,
        value,
        ..
    } = &request.command
    else {
        out.extend_from_slice(b"CLIENT_ERROR unauthenticated\r\n");
        return;
    };
    let credentials = value.splitn(2, |&b| b == b' ').collect::<Vec<_>>();
    let [user, password] = credentials.as_slice() else {
        out.extend_from_slice(b"CLIENT_ERROR authentication failure\r\n");
        return;
    };
    let mut attempt = connection.auth_attempt;
    let login = connection.context.security.authenticate_password(
        connection.peer.ip(),
        "memcached",
        user,
        password,
        &mut attempt,
    );
    connection.auth_attempt = attempt;
    match login {
        Login::Accepted(subject) => {
            connection.subject = Some(subject);
            connection.authenticated = true;
            out.extend_from_slice(b"STORED\r\n");
        }
        Login::Refused => out.extend_from_slice(b"CLIENT_ERROR authentication failure\r\n"),
        Login::Wait(due) => connection.auth_wait = Some(due),
        Login::Throttled(retry_after) => {
            let message = Login::throttled_message(&String::from_utf8_lossy(user), retry_after);
            out.extend_from_slice(format!("CLIENT_ERROR {message}\r\n").as_bytes());
        }
    }
}
