//! Connection commands: PING ECHO HELLO AUTH QUIT RESET SELECT CLIENT (the tracking
//! subcommands are in `tracking.rs`).

use bytes::Bytes;
use weft_resp::Protocol;

use super::{errors, is, pubsub, tracking};
use crate::resp::{Reply, Session};
use crate::security::Login;

/// The Redis version reported to clients, which use it to decide what they may send.
pub const REDIS_COMPATIBLE_VERSION: &str = "7.2.0";

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// `PING [message]`
pub fn ping(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if args.len() <= 2 && pubsub::subscribed_ping(session, args, reply) {
        return;
    }
    match args {
        [_] => reply.simple("PONG"),
        [_, message] => reply.bulk(message),
        _ => reply.error("ERR wrong number of arguments for 'ping' command"),
    }
}

/// `ECHO message`
pub fn echo(_session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    reply.bulk(&args[1]);
}

/// What became of AUTH's or HELLO's credentials.
enum Checked {
    /// Right: the session is authenticated.
    Right,
    /// Wrong (the reply is WRONGPASS).
    Wrong,
    /// The throttle asked the connection to present them again later (no reply yet: the
    /// connection loop waits, then runs the command again), or refused them unchecked (the
    /// reply, written, says so).
    Deferred,
}

/// Checks credentials: a Redis ACL user's (`crate::resp::acl`), else the server's security
/// (a users file, or the shared password of the user `default`); authenticates the session
/// on success, and logs a failure in the ACL log. Credentials of a user that failed too
/// often from this address lately wait for their turn (see `crate::security::Throttle`):
/// the session is then asked to run the command again at that instant.
fn check_credentials(
    session: &mut Session,
    user: &[u8],
    password: &[u8],
    reply: &mut Reply<'_>,
) -> Checked {
    let security = std::sync::Arc::clone(&session.context.security);
    let acl_user = session.context.acl.get(user);
    let mut attempt = session.auth_attempt;
    let login = match &acl_user {
        Some(acl_user) => {
            security.authenticate_with(session.peer.ip(), "RESP", user, &mut attempt, || {
                acl_user
                    .accepts(password)
                    .then(|| security.acl_subject(user))
            })
        }
        None => {
            security.authenticate_password(session.peer.ip(), "RESP", user, password, &mut attempt)
        }
    };
    session.auth_attempt = attempt;
    match login {
        Login::Accepted(subject) => {
            session.subject = Some(subject);
            session.acl_user = acl_user;
            Checked::Right
        }
        Login::Refused => {
            session.acl_log(crate::resp::acl::Reason::Auth, b"AUTH", user);
            Checked::Wrong
        }
        // Inside EXEC nothing may wait: refused as throttled.
        Login::Wait(due) if session.executing => {
            let retry_after = due.saturating_duration_since(std::time::Instant::now());
            throttled(user, retry_after, reply);
            Checked::Deferred
        }
        Login::Wait(due) => {
            session.auth_wait = Some(due);
            Checked::Deferred
        }
        Login::Throttled(retry_after) => {
            throttled(user, retry_after, reply);
            Checked::Deferred
        }
    }
}

/// The refusal of credentials the throttle did not let be checked: not WRONGPASS, since
/// they may be right.
fn throttled(user: &[u8], retry_after: std::time::Duration, reply: &mut Reply<'_>) {
    reply.error(&format!(
        "ERR {}",
        Login::throttled_message(&String::from_utf8_lossy(user), retry_after)
    ));
}

/// `AUTH [username] password`
pub fn auth(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let (user, password): (&[u8], &[u8]) = match args {
        [_, password] => {
            let nopass = session
                .context
                .acl
                .default_nopass()
                .unwrap_or(!session.context.security.required());
            if nopass {
                reply.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
                return;
            }
            (b"default", password)
        }
        [_, user, password] => (user, password),
        _ => {
            reply.error(errors::SYNTAX);
            return;
        }
    };
    match check_credentials(session, user, password, reply) {
        Checked::Right => {
            session.authenticated = true;
            reply.ok();
        }
        Checked::Wrong => reply.error(WRONGPASS),
        Checked::Deferred => {}
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME name]]`
pub fn hello(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut protocol = session.protocol;
    if let Some(version) = args.get(1) {
        match weft_resp::parse_i64_strict(version) {
            Some(2) => protocol = Protocol::Resp2,
            Some(3) => protocol = Protocol::Resp3,
            Some(_) => {
                reply.error("NOPROTO unsupported protocol version");
                return;
            }
            None => {
                reply.error("ERR Protocol version is not an integer or out of range");
                return;
            }
        }
    }
    let mut index = 2;
    let mut name = None;
    let mut credentials = None;
    while index < args.len() {
        let remaining = args.len() - index - 1;
        if is(&args[index], "AUTH") && remaining >= 2 {
            credentials = Some((args[index + 1].clone(), args[index + 2].clone()));
            index += 3;
        } else if is(&args[index], "SETNAME") && remaining >= 1 {
            // Checked while parsing, as Redis does: a bad name fails HELLO before AUTH is
            // tried, so the client does not end up authenticated by a failed HELLO.
            if !valid_client_name(&args[index + 1]) {
                reply.error(BAD_CLIENT_NAME);
                return;
            }
            name = Some(args[index + 1].clone());
            index += 2;
        } else {
            reply.error(&format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[index])
            ));
            return;
        }
    }
    if let Some((user, password)) = credentials {
        match check_credentials(session, &user, &password, reply) {
            Checked::Right => session.authenticated = true,
            Checked::Wrong => return reply.error(WRONGPASS),
            Checked::Deferred => return,
        }
    }
    if !session.authenticated {
        reply.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        return;
    }
    if let Some(name) = name {
        session.client_name = (!name.is_empty()).then_some(name);
    }
    session.protocol = protocol;
    reply.set_protocol(protocol);
    reply.map(8);
    reply.bulk(b"server");
    reply.bulk(b"redis");
    reply.bulk(b"version");
    reply.bulk(REDIS_COMPATIBLE_VERSION.as_bytes());
    reply.bulk(b"proto");
    reply.integer(if protocol == Protocol::Resp3 { 3 } else { 2 });
    reply.bulk(b"id");
    reply.integer(i64::try_from(session.client_id).unwrap_or(i64::MAX));
    reply.bulk(b"mode");
    // As Redis Cluster answers: the node is one of several.
    reply.bulk(if session.context.cluster.is_some() {
        b"cluster"
    } else {
        b"standalone"
    });
    reply.bulk(b"role");
    reply.bulk(b"master");
    reply.bulk(b"modules");
    reply.array(0);
    reply.bulk(b"weft_version");
    reply.bulk(env!("CARGO_PKG_VERSION").as_bytes());
}

/// `QUIT`
pub fn quit(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    session.quit = true;
    reply.ok();
}

/// `RESET`: the connection's state as when it opened — no transaction or watched keys,
/// no subscriptions, tracking off, database 0, RESP2, no name, and unauthenticated if a
/// password is configured.
pub fn reset(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    tracking::disable(session);
    if let Some(cache) = database_cache(session, 0) {
        session.cache = cache;
        session.database = 0;
    }
    session.protocol = Protocol::Resp2;
    reply.set_protocol(Protocol::Resp2);
    (session.acl_user, session.subject) = Session::identity_on_connect(&session.context);
    session.authenticated = session.subject.is_some();
    session.multi = None;
    session.watched.clear();
    pubsub::unsubscribe_all(session);
    session.client_name = None;
    reply.simple("RESET");
}

/// `SELECT index`: switches to the cache mapped to that RESP database.
pub fn select(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(database) = weft_resp::parse_i64_strict(&args[1]) else {
        reply.error(errors::NOT_INTEGER);
        return;
    };
    // Redis reads the index as a C int (`getIntFromObjectOrReply`).
    if i32::try_from(database).is_err() {
        reply.error("ERR value is out of range, value must between -2147483648 and 2147483647");
        return;
    }
    let cache = u32::try_from(database)
        .ok()
        .and_then(|database| database_cache(session, database));
    match cache {
        Some(cache) => {
            session.cache = cache;
            session.database = u32::try_from(database).unwrap_or_default();
            reply.ok();
        }
        None => reply.error("ERR DB index is out of range"),
    }
}

/// The cache of RESP database `database`: the one declared for it, or — on a server that is
/// not clustered, for a database below `resp-databases` — a local cache `db<n>` created now,
/// configured as database 0's (its stores, expiration, memory bounds).
pub(crate) fn database_cache(session: &Session, database: u32) -> Option<weft_core::Cache> {
    database_cache_of(&session.context, database)
}

/// [`database_cache`] of a server.
pub(crate) fn database_cache_of(
    context: &crate::ServerContext,
    database: u32,
) -> Option<weft_core::Cache> {
    let manager = &context.manager;
    if let Some(cache) = manager.cache_for_resp_database(database) {
        return Some(cache);
    }
    if database >= context.settings.resp_databases || context.cluster.is_some() {
        return None;
    }
    // After SWAPDB the number may be served by another database's cache, made now.
    let database = manager.resp_declared_database(database);
    let mut config = manager
        .caches()
        .into_iter()
        .find(|cache| cache.config().resp_database == Some(0))?
        .config()
        .clone();
    config.resp_database = Some(database);
    // Its stores are its own: named after it, not database 0's directory or table.
    for store in &mut config.persistence.stores {
        store.path = None;
        store.table = None;
    }
    let name = format!("db{database}");
    match manager.get_or_create_cache(&name, config) {
        // A cache of that name the user made for something else is not taken over.
        Ok(cache) if cache.config().resp_database == Some(database) => {
            super::notify::watch_cache(context, &cache);
            Some(cache)
        }
        Ok(_) => None,
        Err(error) => {
            tracing::warn!(%error, database, "RESP database not created");
            None
        }
    }
}

const BAD_CLIENT_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// The CLIENT INFO/LIST line of this connection; `command` is the command running now
/// (`client|info`, `client|list`), which is the connection's last command.
pub(crate) fn client_info_line(session: &Session, command: &str, request: &[Bytes]) -> String {
    // The query buffer holds the request being run, as a multi-bulk (Redis' `qbuf`).
    let qbuf: usize = request
        .iter()
        .map(|arg| 1 + arg.len().to_string().len() + 2 + arg.len() + 2)
        .sum::<usize>()
        + 1
        + request.len().to_string().len()
        + 2;
    let user = session
        .subject
        .as_ref()
        .map_or_else(|| "default".to_owned(), |subject| subject.name.to_string());
    let name = session
        .client_name
        .as_deref()
        .map(String::from_utf8_lossy)
        .unwrap_or_default();
    // Redis' flag letters, in Redis' order.
    let mut flags = String::new();
    if session.subscriptions.total() > 0 {
        flags.push('P');
    }
    if session.multi.is_some() {
        flags.push('x');
    }
    if session.tracking.on {
        flags.push('t');
        if tracking::redirect_broken(session) {
            flags.push('R');
        }
        if session.tracking.bcast {
            flags.push('B');
        }
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let multi = session.multi.as_ref().map_or(-1, |multi| {
        i64::try_from(multi.queued.len()).unwrap_or(i64::MAX)
    });
    format!(
        "id={} addr={} laddr={} fd=0 name={} age={} idle=0 flags={} db={} sub={} psub={} ssub={} multi={} qbuf={qbuf} qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={user} redir={} resp={}",
        session.client_id,
        session.peer,
        session.context.local_addr,
        name,
        session.connected_at.elapsed().as_secs(),
        flags,
        session.database,
        session.subscriptions.channel_count(),
        session.subscriptions.pattern_count(),
        session.subscriptions.shard_channel_count(),
        multi,
        command,
        tracking::redirect_of(session),
        if session.protocol == Protocol::Resp3 {
            3
        } else {
            2
        },
    )
}

/// The CLIENT LIST line of another connection, from what it published.
fn other_client_line(mailbox: &crate::resp::push::Mailbox) -> String {
    let client = &mailbox.client;
    let shown = client.shown();
    let mut flags = shown.flags;
    if client.is_blocked() {
        if flags == "N" {
            flags.clear();
        }
        flags.push('b');
    }
    format!(
        "id={} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r cmd={} user={} redir={} resp={}",
        mailbox.client_id(),
        client.peer,
        client.local,
        shown.name,
        client.connected_at.elapsed().as_secs(),
        client.idle().as_secs(),
        flags,
        shown.database,
        shown.subscriptions.0,
        shown.subscriptions.1,
        shown.subscriptions.2,
        shown.multi,
        client.last_command(),
        shown.user,
        shown.redirect,
        shown.protocol,
    )
}

/// Redis' client types: `normal`, `pubsub`, and the replication ones no Weft connection is.
fn client_type(kind: &[u8]) -> Result<Option<bool>, String> {
    if is(kind, "normal") {
        Ok(Some(false))
    } else if is(kind, "pubsub") {
        Ok(Some(true))
    } else if ["slave", "replica", "master"]
        .iter()
        .any(|name| is(kind, name))
    {
        Ok(None)
    } else {
        Err(format!(
            "ERR Unknown client type '{}'",
            String::from_utf8_lossy(kind)
        ))
    }
}

/// `CLIENT LIST [TYPE type | ID id [id ...]]`, with Redis 7's argument rules: every open
/// connection, oldest first; this one's line from its own state, the others' from what
/// they published.
fn client_list(session: &Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let clients: Vec<_> = session
        .context
        .push
        .clients
        .all()
        .into_iter()
        .filter(|mailbox| !mailbox.client.is_internal())
        .collect();
    let line = |mailbox: &crate::resp::push::Mailbox| {
        if mailbox.client_id() == session.client_id {
            client_info_line(session, "client|list", args)
        } else {
            other_client_line(mailbox)
        }
    };
    let mut text = String::new();
    match args {
        [_, _] => {
            for mailbox in &clients {
                text.push_str(&line(mailbox));
                text.push('\n');
            }
        }
        [_, _, option, kind] if is(option, "TYPE") => {
            let wanted = match client_type(kind) {
                Ok(wanted) => wanted,
                Err(error) => return reply.error(&error),
            };
            for mailbox in &clients {
                // Redis counts a client with subscriptions as `pubsub`, not `normal`.
                let subscribed = if mailbox.client_id() == session.client_id {
                    session.subscriptions.total() > 0
                } else {
                    mailbox.client.shown().flags.contains('P')
                };
                if wanted == Some(subscribed) {
                    text.push_str(&line(mailbox));
                    text.push('\n');
                }
            }
        }
        [_, _, option, ids @ ..] if is(option, "ID") && !ids.is_empty() => {
            for id in ids {
                let Some(id) = weft_resp::parse_i64_strict(id) else {
                    return reply.error("ERR Invalid client ID");
                };
                // Redis repeats a repeated ID.
                if let Some(mailbox) = clients
                    .iter()
                    .find(|mailbox| u64::try_from(id).is_ok_and(|id| id == mailbox.client_id()))
                {
                    text.push_str(&line(mailbox));
                    text.push('\n');
                }
            }
        }
        _ => return reply.error(errors::SYNTAX),
    };
    reply.verbatim(&text);
}

/// `CLIENT KILL ip:port` (OK, or no such client) or `CLIENT KILL <filter> <value> ...` with
/// Redis' filters ID, TYPE, USER, ADDR, LADDR, SKIPME and MAXAGE (the number killed).
/// Connections close once their running command answers; this one after this reply.
fn client_kill(session: &Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let clients: Vec<_> = session
        .context
        .push
        .clients
        .all()
        .into_iter()
        .filter(|mailbox| !mailbox.client.is_internal())
        .collect();
    if let [_, _, address] = args {
        let address = String::from_utf8_lossy(address);
        match clients
            .iter()
            .find(|mailbox| mailbox.client.peer.to_string() == address)
        {
            Some(mailbox) => {
                mailbox.kill();
                reply.ok();
            }
            None => reply.error("ERR No such client"),
        }
        return;
    }
    let mut id = None;
    let mut kind = None;
    let mut user = None;
    let mut address = None;
    let mut local = None;
    let mut skip_me = true;
    let mut max_age = None;
    let mut filters = args[2..].chunks(2);
    for filter in filters.by_ref() {
        let [name, value] = filter else {
            return reply.error(errors::SYNTAX);
        };
        if is(name, "ID") {
            match weft_resp::parse_i64_strict(value).filter(|&id| id > 0) {
                Some(value) => id = u64::try_from(value).ok(),
                None => {
                    return reply.error("ERR client-id should be greater than 0");
                }
            }
        } else if is(name, "TYPE") {
            match client_type(value) {
                Ok(wanted) => kind = Some(wanted),
                Err(error) => return reply.error(&error),
            }
        } else if is(name, "USER") {
            let name = String::from_utf8_lossy(value).into_owned();
            let known = session.context.acl.get(name.as_bytes()).is_some()
                || name == "default"
                || session
                    .context
                    .security
                    .user_names()
                    .iter()
                    .any(|(user, _)| *user == name);
            if !known {
                return reply.error(&format!("ERR No such user '{name}'"));
            }
            user = Some(name);
        } else if is(name, "ADDR") {
            address = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(name, "LADDR") {
            local = Some(String::from_utf8_lossy(value).into_owned());
        } else if is(name, "SKIPME") {
            if is(value, "yes") {
                skip_me = true;
            } else if is(value, "no") {
                skip_me = false;
            } else {
                return reply.error(errors::SYNTAX);
            }
        } else if is(name, "MAXAGE") {
            match weft_resp::parse_i64_strict(value) {
                Some(age) => max_age = Some(age),
                None => return reply.error(errors::NOT_INTEGER),
            }
        } else {
            return reply.error(errors::SYNTAX);
        }
    }
    let mut killed = 0;
    for mailbox in &clients {
        let client = &mailbox.client;
        let me = mailbox.client_id() == session.client_id;
        let shown = client.shown();
        let matches = id.is_none_or(|id| id == mailbox.client_id())
            && kind.is_none_or(|wanted| wanted == Some(shown.flags.contains('P')))
            && user.as_ref().is_none_or(|user| *user == shown.user)
            && address
                .as_ref()
                .is_none_or(|address| *address == client.peer.to_string())
            && local
                .as_ref()
                .is_none_or(|local| *local == client.local.to_string())
            && max_age.is_none_or(|age| {
                i64::try_from(client.connected_at.elapsed().as_secs()).unwrap_or(i64::MAX) >= age
            })
            && !(me && skip_me);
        if matches {
            mailbox.kill();
            killed += 1;
        }
    }
    reply.integer(killed);
}

/// `CLIENT PAUSE timeout [WRITE|ALL]`: holds back every client's commands (or only those
/// that write, with WRITE) for `timeout` milliseconds or until CLIENT UNPAUSE.
fn client_pause(session: &Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(timeout) = weft_resp::parse_i64_strict(&args[2]) else {
        return reply.error("ERR timeout is not an integer or out of range");
    };
    let Ok(timeout) = u64::try_from(timeout) else {
        return reply.error("ERR timeout is negative");
    };
    let writes_only = match &args[3..] {
        [] => false,
        [mode] if is(mode, "WRITE") => true,
        [mode] if is(mode, "ALL") => false,
        _ => return reply.error(errors::SYNTAX),
    };
    let until = std::time::Instant::now()
        .checked_add(std::time::Duration::from_millis(timeout))
        .unwrap_or_else(|| std::time::Instant::now() + std::time::Duration::from_secs(1 << 40));
    session.context.pause.pause(until, writes_only);
    reply.ok();
}

/// `CLIENT SETNAME|GETNAME|ID|INFO|LIST|SETINFO|TRACKING|CACHING|GETREDIR|TRACKINGINFO|HELP`
pub fn client(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let arity_error = |reply: &mut Reply<'_>| {
        reply.error(&format!(
            "ERR wrong number of arguments for 'client|{sub}' command"
        ));
    };
    match sub.as_str() {
        "setname" => {
            let [_, _, name] = args else {
                return arity_error(reply);
            };
            if !valid_client_name(name) {
                reply.error(BAD_CLIENT_NAME);
                return;
            }
            session.client_name = (!name.is_empty()).then(|| name.clone());
            reply.ok();
        }
        "getname" => {
            if args.len() != 2 {
                return arity_error(reply);
            }
            match &session.client_name {
                Some(name) => reply.bulk(name),
                None => reply.null(),
            }
        }
        "id" => {
            if args.len() != 2 {
                return arity_error(reply);
            }
            reply.integer(i64::try_from(session.client_id).unwrap_or(i64::MAX));
        }
        "info" => {
            if args.len() != 2 {
                return arity_error(reply);
            }
            let line = client_info_line(session, "client|info", args) + "\n";
            reply.verbatim(&line);
        }
        "list" => client_list(session, args, reply),
        "kill" => {
            if args.len() < 3 {
                return arity_error(reply);
            }
            client_kill(session, args, reply);
        }
        "unblock" => {
            let how = match args {
                [_, _, _] => crate::resp::clients::Unblock::Timeout,
                [_, _, _, how] if is(how, "TIMEOUT") => crate::resp::clients::Unblock::Timeout,
                [_, _, _, how] if is(how, "ERROR") => crate::resp::clients::Unblock::Error,
                [_, _, _, _] => {
                    return reply.error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
                }
                _ => return arity_error(reply),
            };
            let Some(id) = weft_resp::parse_i64_strict(&args[2]) else {
                return reply.error(errors::NOT_INTEGER);
            };
            let unblocked = u64::try_from(id)
                .ok()
                .and_then(|id| session.context.push.clients.get(id))
                .is_some_and(|mailbox| mailbox.client.unblock(how));
            reply.integer(i64::from(unblocked));
        }
        "reply" => {
            let [_, _, mode] = args else {
                return arity_error(reply);
            };
            use crate::resp::session::ReplyMode;
            if is(mode, "ON") {
                session.reply_mode = ReplyMode::On;
                reply.ok();
            } else if is(mode, "OFF") {
                session.reply_mode = ReplyMode::Off;
            } else if is(mode, "SKIP") {
                if session.reply_mode != ReplyMode::Off {
                    session.reply_mode = ReplyMode::SkipNext;
                }
            } else {
                reply.error(errors::SYNTAX);
            }
        }
        "pause" => {
            if !(3..=4).contains(&args.len()) {
                return arity_error(reply);
            }
            client_pause(session, args, reply);
        }
        "unpause" => {
            if args.len() != 2 {
                return arity_error(reply);
            }
            session.context.pause.unpause();
            reply.ok();
        }
        "no-evict" => {
            // Weft does not evict clients for memory: either answer holds.
            let [_, _, mode] = args else {
                return arity_error(reply);
            };
            if is(mode, "ON") || is(mode, "OFF") {
                reply.ok();
            } else {
                reply.error(errors::SYNTAX);
            }
        }
        "tracking" => {
            if args.len() < 3 {
                return arity_error(reply);
            }
            tracking::client_tracking(session, args, reply);
        }
        "caching" => {
            if args.len() != 3 {
                return arity_error(reply);
            }
            tracking::client_caching(session, args, reply);
        }
        "getredir" => {
            if args.len() != 2 {
                return arity_error(reply);
            }
            tracking::client_getredir(session, args, reply);
        }
        "trackinginfo" => {
            if args.len() != 2 {
                return arity_error(reply);
            }
            tracking::client_trackinginfo(session, args, reply);
        }
        "setinfo" => {
            let [_, _, attribute, value] = args else {
                return arity_error(reply);
            };
            if !is(attribute, "lib-name") && !is(attribute, "lib-ver") {
                reply.error(&format!(
                    "ERR Unrecognized option '{}'",
                    String::from_utf8_lossy(attribute)
                ));
            } else if !valid_client_name(value) {
                reply.error(&format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    String::from_utf8_lossy(attribute)
                ));
            } else {
                reply.ok();
            }
        }
        "help" => {
            if args.len() != 2 {
                return arity_error(reply);
            }
            let lines = [
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "CACHING (YES|NO)",
                "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
                "GETREDIR",
                "    Return the client ID we are redirecting to when tracking is enabled.",
                "GETNAME",
                "    Return the name of the current connection.",
                "ID",
                "    Return the ID of the current connection.",
                "INFO",
                "    Return information about the current client connection.",
                "LIST",
                "    Return information about client connections.",
                "SETINFO <option> <value>",
                "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
                "SETNAME <name>",
                "    Assign the name <name> to the current connection.",
                "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
                "         [OPTIN] [OPTOUT] [NOLOOP]",
                "    Control server assisted client side caching.",
                "TRACKINGINFO",
                "    Report tracking status for the current connection.",
                "HELP",
                "    Print this help.",
            ];
            reply.array(lines.len());
            for line in lines {
                reply.simple(line);
            }
        }
        _ => reply.error(&format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}
