//! `ACL`: Redis' ACL users (`crate::resp::acl`) — SETUSER, GETUSER, DELUSER, USERS, LIST,
//! WHOAMI, CAT, DRYRUN, GENPASS, LOG, and LOAD/SAVE (which answer, as Redis does without an
//! ACL file, that there is none). With a users file, USERS and LIST show its users too (they
//! are authorized by roles, not by ACL rules).

use bytes::Bytes;

use super::is;
use crate::resp::acl;
use crate::resp::meta::{self, CATEGORIES};
use crate::resp::{Reply, Session, table};

/// `ACL subcommand ...`
pub fn acl(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_uppercase();
    match sub.as_str() {
        "WHOAMI" => {
            let name = session
                .subject
                .as_ref()
                .map_or(crate::security::DEFAULT_USER, |s| &*s.name);
            reply.bulk(name.as_bytes());
        }
        "USERS" | "LIST" => list(session, sub == "USERS", reply),
        "SETUSER" => match session.context.acl.set_user(&args[2], &args[3..]) {
            Ok(user) => {
                close_revoked_subscribers(session, &user);
                reply.ok();
            }
            Err(error) => reply.error(&error),
        },
        "GETUSER" => getuser(session, &args[2], reply),
        "DELUSER" => deluser(session, &args[2..], reply),
        "CAT" => cat(args.get(2), reply),
        "GENPASS" => genpass(args.get(2), reply),
        "LOG" => log(session, args.get(2), reply),
        "DRYRUN" => dryrun(session, &args[2], &args[3..], reply),
        "LOAD" | "SAVE" => reply.error(
            "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.",
        ),
        "HELP" => super::streams::help_reply(
            reply,
            "ACL",
            &[
                "CAT [<category>]",
                "    List all commands that belong to <category>, or all command categories",
                "    when no category is specified.",
                "DELUSER <username> [<username> ...]",
                "    Delete a list of users.",
                "DRYRUN <username> <command> [<arg> ...]",
                "    Returns whether the user can execute the given command without executing the command.",
                "GETUSER <username>",
                "    Get the user's details.",
                "GENPASS [<bits>]",
                "    Generate a secure 256-bit user password. The optional `bits` argument can",
                "    be used to specify a different size.",
                "LIST",
                "    Show users details in config file format.",
                "LOAD",
                "    Reload users from the ACL file.",
                "LOG [<count> | RESET]",
                "    Show the ACL log entries.",
                "SAVE",
                "    Save the current config to the ACL file.",
                "SETUSER <username> <attribute> [<attribute> ...]",
                "    Create or modify a user with the specified attributes.",
                "USERS",
                "    List all the registered usernames.",
                "WHOAMI",
                "    Return the current connection username.",
            ],
        ),
        _ => reply.error(&format!(
            "ERR unknown subcommand '{}'. Try ACL HELP.",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

/// ACL USERS (names) or LIST (Redis' `user ...` lines): the ACL users, then a users file's
/// (as `user NAME on groups:...`), sorted together by name.
fn list(session: &Session, names_only: bool, reply: &mut Reply<'_>) {
    let acl = &session.context.acl;
    let mut lines: Vec<(Vec<u8>, Vec<u8>)> = acl
        .names()
        .into_iter()
        .map(|name| {
            let line = acl.describe(&name).unwrap_or_default().into_bytes();
            (name, line)
        })
        .collect();
    if session.context.security.has_users() {
        for (name, groups) in session.context.security.user_names() {
            if lines.iter().any(|(known, _)| known == name.as_bytes()) {
                continue;
            }
            let line = format!("user {name} on groups:{}", groups.join(","));
            lines.push((name.into_bytes(), line.into_bytes()));
        }
        lines.sort();
    }
    reply.array(lines.len());
    for (name, line) in lines {
        reply.bulk(if names_only { &name } else { &line });
    }
}

/// Closes the connections of `user` subscribed to a channel or pattern its rules no longer
/// grant, as Redis does when ACL SETUSER revokes one.
fn close_revoked_subscribers(session: &Session, user: &acl::User) {
    let name = String::from_utf8_lossy(user.name());
    let pubsub = &session.context.push.pubsub;
    for mailbox in session.context.push.clients.all() {
        if mailbox.client.is_internal() || !mailbox.is_subscribed() {
            continue;
        }
        if mailbox.client.shown().user != name {
            continue;
        }
        let (channels, patterns) = pubsub.subscriptions_of(mailbox.client_id());
        if !user.keeps_channels(&channels, &patterns) {
            mailbox.kill();
        }
    }
}

fn getuser(session: &Session, name: &[u8], reply: &mut Reply<'_>) {
    let Some(details) = session.context.acl.details(name) else {
        return reply.null();
    };
    let selector = |reply: &mut Reply<'_>, s: &acl::SelectorDetails| {
        reply.bulk(b"commands");
        reply.bulk(s.commands.as_bytes());
        reply.bulk(b"keys");
        reply.bulk(s.keys.as_bytes());
        reply.bulk(b"channels");
        reply.bulk(s.channels.as_bytes());
    };
    reply.map(6);
    reply.bulk(b"flags");
    reply.set(details.flags.len());
    for flag in &details.flags {
        reply.bulk(flag.as_bytes());
    }
    reply.bulk(b"passwords");
    reply.array(details.passwords.len());
    for password in &details.passwords {
        reply.bulk(password.as_bytes());
    }
    selector(reply, &details.root);
    reply.bulk(b"selectors");
    reply.array(details.selectors.len());
    for s in &details.selectors {
        reply.map(3);
        selector(reply, s);
    }
}

/// ACL DELUSER: the users' connections are closed, as Redis closes them.
fn deluser(session: &Session, names: &[Bytes], reply: &mut Reply<'_>) {
    if names.iter().any(|name| &name[..] == b"default") {
        return reply.error("ERR The 'default' user cannot be removed");
    }
    let removed = session.context.acl.delete(names);
    for user in &removed {
        let name = String::from_utf8_lossy(user.name());
        for mailbox in session.context.push.clients.all() {
            if !mailbox.client.is_internal() && mailbox.client.shown().user == name {
                mailbox.kill();
            }
        }
    }
    reply.integer(i64::try_from(removed.len()).unwrap_or(i64::MAX));
}

fn cat(category: Option<&Bytes>, reply: &mut Reply<'_>) {
    let Some(category) = category else {
        reply.array(CATEGORIES.len());
        for name in CATEGORIES {
            reply.bulk(name.as_bytes());
        }
        return;
    };
    let Some(bit) = meta::category(category) else {
        return reply.error(&format!(
            "ERR Unknown category '{}'",
            String::from_utf8_lossy(&category[..category.len().min(128)])
        ));
    };
    let names = acl::commands_in(bit);
    reply.array(names.len());
    for name in names {
        reply.bulk(name.as_bytes());
    }
}

fn genpass(bits: Option<&Bytes>, reply: &mut Reply<'_>) {
    const MAX_BITS: i64 = 4096;
    let bits = match bits {
        None => 256,
        Some(bits) => match weft_resp::parse_i64_strict(bits) {
            Some(bits) => bits,
            None => return reply.error(super::errors::NOT_INTEGER),
        },
    };
    if bits <= 0 || bits > MAX_BITS {
        return reply.error(&format!(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {MAX_BITS}"
        ));
    }
    match acl::random_hex(usize::try_from(bits).unwrap_or(256)) {
        Some(password) => reply.bulk(password.as_bytes()),
        None => reply.error("ERR the system's random source failed"),
    }
}

fn log(session: &Session, argument: Option<&Bytes>, reply: &mut Reply<'_>) {
    let acl = &session.context.acl;
    let count = match argument {
        None => 10,
        Some(word) if is(word, "RESET") => {
            acl.log_reset();
            return reply.ok();
        }
        Some(count) => match weft_resp::parse_i64_strict(count) {
            Some(count) => usize::try_from(count.max(0)).unwrap_or(0),
            None => return reply.error(super::errors::NOT_INTEGER),
        },
    };
    let entries = acl.log_entries(count);
    reply.array(entries.len());
    for entry in entries {
        let (count, reason, context, object, username, age, client_info) = entry.fields();
        reply.map(7);
        reply.bulk(b"count");
        reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
        reply.bulk(b"reason");
        reply.bulk(reason.as_bytes());
        reply.bulk(b"context");
        reply.bulk(context.as_bytes());
        reply.bulk(b"object");
        reply.bulk(object);
        reply.bulk(b"username");
        reply.bulk(username);
        reply.bulk(b"age-seconds");
        reply.double(age);
        reply.bulk(b"client-info");
        reply.bulk(client_info.as_bytes());
    }
}

fn dryrun(session: &Session, name: &[u8], command: &[Bytes], reply: &mut Reply<'_>) {
    let Some(user) = session.context.acl.get(name) else {
        return reply.error(&format!(
            "ERR User '{}' not found",
            String::from_utf8_lossy(name)
        ));
    };
    let Some(spec) = table::lookup(&command[0]) else {
        return reply.error(&format!(
            "ERR Command '{}' not found",
            String::from_utf8_lossy(&command[0])
        ));
    };
    if !spec.arity_ok(command.len()) {
        return reply.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            acl::full_name(spec, command)
        ));
    }
    match user.check(spec, command) {
        Ok(()) => reply.ok(),
        Err(denial) => reply.bulk(acl::dry_run_refusal(denial, spec, command).as_bytes()),
    }
}
