//! Pub/sub: SUBSCRIBE PSUBSCRIBE SSUBSCRIBE UNSUBSCRIBE PUNSUBSCRIBE SUNSUBSCRIBE PUBLISH
//! SPUBLISH PUBSUB, server-wide (not per database), as in Redis.
//!
//! [`PubSub`] maps channels, shard channels and patterns to their subscribers' mailboxes
//! (`resp::push`); PUBLISH appends the message to each one without waiting, so a slow
//! subscriber never holds a publisher up — it is disconnected once its mailbox passes
//! `pubsub-output-bytes-max`. A message a connection publishes to itself is written into
//! its own reply, before PUBLISH's count, as Redis writes it (inside EXEC it goes through
//! the mailbox instead, after EXEC's reply, so it cannot split EXEC's array).
//!
//! Shard channels (SSUBSCRIBE, SPUBLISH) are a separate namespace that patterns do not
//! match; without a cluster they behave like channels, as in a standalone Redis.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;
use weft_resp::Protocol;

use super::{glob, is};
use crate::resp::push::{Mailbox, write_message, write_pattern_message};
use crate::resp::table::CommandSpec;
use crate::resp::{Reply, Session};

/// What a subscription is to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Channel,
    Shard,
    Pattern,
}

impl Kind {
    fn subscribed(self) -> &'static [u8] {
        match self {
            Self::Channel => b"subscribe",
            Self::Shard => b"ssubscribe",
            Self::Pattern => b"psubscribe",
        }
    }

    fn unsubscribed(self) -> &'static [u8] {
        match self {
            Self::Channel => b"unsubscribe",
            Self::Shard => b"sunsubscribe",
            Self::Pattern => b"punsubscribe",
        }
    }
}

/// Subscribers by channel, shard channel and pattern.
#[derive(Debug, Default)]
pub struct PubSub {
    registry: RwLock<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    channels: HashMap<Bytes, Vec<Arc<Mailbox>>>,
    shard_channels: HashMap<Bytes, Vec<Arc<Mailbox>>>,
    patterns: HashMap<Bytes, Vec<Arc<Mailbox>>>,
}

impl Registry {
    fn map(&mut self, kind: Kind) -> &mut HashMap<Bytes, Vec<Arc<Mailbox>>> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Shard => &mut self.shard_channels,
            Kind::Pattern => &mut self.patterns,
        }
    }
}

impl PubSub {
    /// Publishes a message no client sent (keyspace notifications) on `channel`.
    pub fn notify(&self, channel: &[u8], message: &[u8]) {
        self.publish(Kind::Channel, channel, message, 0, None);
    }

    /// Channels and patterns with subscribers (INFO's `pubsub_channels`, `pubsub_patterns`).
    #[must_use]
    pub fn counts(&self) -> (usize, usize) {
        let registry = self.registry.read();
        (registry.channels.len(), registry.patterns.len())
    }

    /// The channels (shard channels included) and patterns connection `client_id` is
    /// subscribed to — for ACL SETUSER, which closes subscribers that lost one.
    pub fn subscriptions_of(&self, client_id: u64) -> (Vec<Bytes>, Vec<Bytes>) {
        let registry = self.registry.read();
        let of = |map: &HashMap<Bytes, Vec<Arc<Mailbox>>>| -> Vec<Bytes> {
            map.iter()
                .filter(|(_, subscribers)| subscribers.iter().any(|m| m.client_id() == client_id))
                .map(|(name, _)| name.clone())
                .collect()
        };
        let mut channels = of(&registry.channels);
        channels.extend(of(&registry.shard_channels));
        (channels, of(&registry.patterns))
    }

    fn add(&self, kind: Kind, name: &Bytes, mailbox: &Arc<Mailbox>) {
        self.registry
            .write()
            .map(kind)
            .entry(name.clone())
            .or_default()
            .push(Arc::clone(mailbox));
    }

    fn remove(&self, kind: Kind, name: &[u8], client_id: u64) {
        let mut registry = self.registry.write();
        let map = registry.map(kind);
        if let Some(subscribers) = map.get_mut(name) {
            subscribers.retain(|mailbox| mailbox.client_id() != client_id);
            if subscribers.is_empty() {
                // Forgotten with its last subscriber, so that channel names cannot pile up.
                map.remove(name);
            }
        }
    }

    /// Delivers `message` to the subscribers of `channel` (and, for channels, of the
    /// patterns matching it); returns how many received it. The publisher's own copy goes
    /// to `own` when given.
    fn publish(
        &self,
        kind: Kind,
        channel: &[u8],
        message: &[u8],
        publisher: u64,
        mut own: Option<&mut Reply<'_>>,
    ) -> usize {
        let registry = self.registry.read();
        let channels = if kind == Kind::Shard {
            &registry.shard_channels
        } else {
            &registry.channels
        };
        let kind_name: &[u8] = if kind == Kind::Shard {
            b"smessage"
        } else {
            b"message"
        };
        let mut receivers = 0;
        for mailbox in channels.get(channel).into_iter().flatten() {
            receivers += 1;
            match own.as_deref_mut() {
                Some(reply) if mailbox.client_id() == publisher => {
                    reply.push(3);
                    reply.bulk(kind_name);
                    reply.bulk(channel);
                    reply.bulk(message);
                }
                _ => mailbox.push(|out, protocol| {
                    write_message(out, protocol, kind_name, channel, message);
                }),
            }
        }
        if kind == Kind::Shard {
            return receivers;
        }
        for (pattern, subscribers) in &registry.patterns {
            if !glob::matches(pattern, channel) {
                continue;
            }
            for mailbox in subscribers {
                receivers += 1;
                match own.as_deref_mut() {
                    Some(reply) if mailbox.client_id() == publisher => {
                        reply.push(4);
                        reply.bulk(b"pmessage");
                        reply.bulk(pattern);
                        reply.bulk(channel);
                        reply.bulk(message);
                    }
                    _ => mailbox.push(|out, protocol| {
                        write_pattern_message(out, protocol, pattern, channel, message);
                    }),
                }
            }
        }
        receivers
    }
}

/// One connection's subscriptions.
#[derive(Debug, Default)]
pub struct Subscriptions {
    channels: HashSet<Bytes>,
    shard_channels: HashSet<Bytes>,
    /// In subscription order, as Redis lists them.
    patterns: Vec<Bytes>,
}

impl Subscriptions {
    /// Channels, shard channels and patterns subscribed to.
    #[must_use]
    pub fn total(&self) -> usize {
        self.channels.len() + self.shard_channels.len() + self.patterns.len()
    }

    /// Channels subscribed to (CLIENT LIST `sub=`).
    #[must_use]
    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }

    /// Shard channels subscribed to (CLIENT LIST `ssub=`).
    #[must_use]
    pub fn shard_channel_count(&self) -> usize {
        self.shard_channels.len()
    }

    /// Patterns subscribed to (CLIENT LIST `psub=`).
    #[must_use]
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }

    /// The count replies carry: channels and patterns together, shard channels apart.
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard_channels.len(),
        }
    }

    fn insert(&mut self, kind: Kind, name: &[u8]) -> Option<Bytes> {
        let owned = Bytes::copy_from_slice(name);
        let added = match kind {
            Kind::Channel => self.channels.insert(owned.clone()),
            Kind::Shard => self.shard_channels.insert(owned.clone()),
            Kind::Pattern => {
                let added = !self.patterns.iter().any(|p| p[..] == *name);
                if added {
                    self.patterns.push(owned.clone());
                }
                added
            }
        };
        added.then_some(owned)
    }

    fn remove(&mut self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Channel => self.channels.remove(name),
            Kind::Shard => self.shard_channels.remove(name),
            Kind::Pattern => {
                let before = self.patterns.len();
                self.patterns.retain(|p| p[..] != *name);
                self.patterns.len() != before
            }
        }
    }

    fn names(&self, kind: Kind) -> Vec<Bytes> {
        match kind {
            Kind::Channel => self.channels.iter().cloned().collect(),
            Kind::Shard => self.shard_channels.iter().cloned().collect(),
            Kind::Pattern => self.patterns.clone(),
        }
    }
}

/// Commands a RESP2 connection with subscriptions may run (Redis' "only (P|S)SUBSCRIBE /
/// (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context").
#[must_use]
pub fn allowed_while_subscribed(spec: &CommandSpec) -> bool {
    matches!(
        spec.name,
        "ping"
            | "subscribe"
            | "ssubscribe"
            | "psubscribe"
            | "unsubscribe"
            | "sunsubscribe"
            | "punsubscribe"
            | "quit"
            | "reset"
    )
}

/// Subcommands Redis knows for the container commands Weft serves: Redis names a refused
/// subcommand `client|id`, and an unknown one gets the container's own error instead.
const SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "client",
        &[
            "caching",
            "getname",
            "getredir",
            "help",
            "id",
            "info",
            "kill",
            "list",
            "no-evict",
            "no-touch",
            "pause",
            "reply",
            "setinfo",
            "setname",
            "tracking",
            "trackinginfo",
            "unblock",
            "unpause",
        ],
    ),
    (
        "command",
        &[
            "count",
            "docs",
            "getkeys",
            "getkeysandflags",
            "help",
            "info",
            "list",
        ],
    ),
    (
        "object",
        &["encoding", "freq", "help", "idletime", "refcount"],
    ),
    (
        "pubsub",
        &[
            "channels",
            "help",
            "numpat",
            "numsub",
            "shardchannels",
            "shardnumsub",
        ],
    ),
];

/// The error for a command a subscribed RESP2 connection may not run, or `None` when the
/// command is a container whose subcommand Redis does not know (its handler then answers
/// with the container's unknown-subcommand error, as Redis does first).
#[must_use]
pub fn refused_while_subscribed(spec: &CommandSpec, args: &[Bytes]) -> Option<String> {
    let mut name = spec.name.to_owned();
    if let Some((_, known)) = SUBCOMMANDS.iter().find(|(c, _)| *c == spec.name)
        && let Some(sub) = args.get(1)
    {
        let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
        if !known.contains(&sub.as_str()) {
            return None;
        }
        name = format!("{name}|{sub}");
    }
    Some(format!(
        "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    ))
}

fn count_reply(reply: &mut Reply<'_>, count: usize) {
    reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
}

fn subscribe_to(session: &mut Session, kind: Kind, args: &[Bytes], reply: &mut Reply<'_>) {
    for name in &args[1..] {
        if let Some(owned) = session.subscriptions.insert(kind, name) {
            session
                .context
                .push
                .pubsub
                .add(kind, &owned, &session.mailbox);
        }
        reply.push(3);
        reply.bulk(kind.subscribed());
        reply.bulk(name);
        count_reply(reply, session.subscriptions.count(kind));
    }
    session
        .mailbox
        .set_subscribed(session.subscriptions.total() > 0);
}

/// Unsubscribes from `names`, or from every subscription of `kind` when `names` is empty;
/// `notify` writes Redis' reply for each.
fn unsubscribe_from(
    session: &mut Session,
    kind: Kind,
    names: &[Bytes],
    reply: Option<&mut Reply<'_>>,
) {
    let all;
    let names = if names.is_empty() {
        all = session.subscriptions.names(kind);
        &all[..]
    } else {
        names
    };
    let mut reply = reply;
    for name in names {
        if session.subscriptions.remove(kind, name) {
            session
                .context
                .push
                .pubsub
                .remove(kind, name, session.client_id);
        }
        if let Some(reply) = reply.as_deref_mut() {
            reply.push(3);
            reply.bulk(kind.unsubscribed());
            reply.bulk(name);
            count_reply(reply, session.subscriptions.count(kind));
        }
    }
    if names.is_empty()
        && let Some(reply) = reply
    {
        // Subscribed to nothing: Redis still answers, with a null name.
        reply.push(3);
        reply.bulk(kind.unsubscribed());
        reply.null();
        count_reply(reply, session.subscriptions.count(kind));
    }
    session
        .mailbox
        .set_subscribed(session.subscriptions.total() > 0);
}

/// Drops every subscription without replies (RESET, and the connection closing).
pub fn unsubscribe_all(session: &mut Session) {
    for kind in [Kind::Channel, Kind::Shard, Kind::Pattern] {
        let names = session.subscriptions.names(kind);
        if !names.is_empty() {
            unsubscribe_from(session, kind, &names, None);
        }
    }
}

/// `SUBSCRIBE channel [channel ...]`
pub fn subscribe(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    subscribe_to(session, Kind::Channel, args, reply);
}

/// `SSUBSCRIBE shardchannel [shardchannel ...]`
pub fn ssubscribe(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    subscribe_to(session, Kind::Shard, args, reply);
}

/// `PSUBSCRIBE pattern [pattern ...]`
pub fn psubscribe(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    subscribe_to(session, Kind::Pattern, args, reply);
}

/// `UNSUBSCRIBE [channel ...]`
pub fn unsubscribe(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    unsubscribe_from(session, Kind::Channel, &args[1..], Some(reply));
}

/// `SUNSUBSCRIBE [shardchannel ...]`
pub fn sunsubscribe(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    unsubscribe_from(session, Kind::Shard, &args[1..], Some(reply));
}

/// `PUNSUBSCRIBE [pattern ...]`
pub fn punsubscribe(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    unsubscribe_from(session, Kind::Pattern, &args[1..], Some(reply));
}

fn publish_as(session: &mut Session, kind: Kind, args: &[Bytes], reply: &mut Reply<'_>) {
    // Inside EXEC the publisher's own copy must not land inside EXEC's array.
    let own = (!session.executing).then_some(&mut *reply);
    let receivers =
        session
            .context
            .push
            .pubsub
            .publish(kind, &args[1], &args[2], session.client_id, own);
    // As in Redis Cluster, a message reaches subscribers on every node, and the reply counts
    // those of this node.
    if let Some(node) = &session.context.cluster {
        let published = Published {
            shard: kind == Kind::Shard,
            channel: args[1].to_vec(),
            message: args[2].to_vec(),
        };
        if let Ok(payload) = postcard::to_stdvec(&published) {
            node.events().broadcast(node, TOPIC, &payload);
        }
    }
    count_reply(reply, receivers);
}

/// The grid topic messages published on one node travel on to the others.
pub const TOPIC: &str = "weft.pubsub";

/// A message published on another node.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Published {
    shard: bool,
    channel: Vec<u8>,
    message: Vec<u8>,
}

/// Delivers the messages other nodes publish to this node's subscribers.
pub fn receive_published(
    context: &std::sync::Arc<crate::ServerContext>,
) -> weft_grid::events::MessageHandler {
    let context = std::sync::Arc::downgrade(context);
    std::sync::Arc::new(move |payload: &[u8]| {
        let (Some(context), Ok(published)) = (
            context.upgrade(),
            postcard::from_bytes::<Published>(payload),
        ) else {
            return;
        };
        let kind = if published.shard {
            Kind::Shard
        } else {
            Kind::Channel
        };
        context
            .push
            .pubsub
            .publish(kind, &published.channel, &published.message, 0, None);
    })
}

/// `PUBLISH channel message`
pub fn publish(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    publish_as(session, Kind::Channel, args, reply);
}

/// `SPUBLISH shardchannel message`
pub fn spublish(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    publish_as(session, Kind::Shard, args, reply);
}

/// `PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT | SHARDCHANNELS [pattern] |
/// SHARDNUMSUB [channel ...] | HELP`
pub fn pubsub(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = &args[1];
    let lower = String::from_utf8_lossy(sub).to_ascii_lowercase();
    let arity_error = |reply: &mut Reply<'_>| {
        reply.error(&format!(
            "ERR wrong number of arguments for 'pubsub|{lower}' command"
        ));
    };
    let syntax_error = |reply: &mut Reply<'_>| {
        reply.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(sub)
        ));
    };
    let registry = session.context.push.pubsub.registry.read();
    if is(sub, "CHANNELS") || is(sub, "SHARDCHANNELS") {
        let map = if is(sub, "CHANNELS") {
            &registry.channels
        } else {
            &registry.shard_channels
        };
        let pattern = match args {
            [_, _] => None,
            [_, _, pattern] => Some(pattern),
            _ => return syntax_error(reply),
        };
        let names: Vec<&Bytes> = map
            .keys()
            .filter(|name| pattern.is_none_or(|pattern| glob::matches(pattern, name)))
            .collect();
        reply.array(names.len());
        for name in names {
            reply.bulk(name);
        }
    } else if is(sub, "NUMSUB") || is(sub, "SHARDNUMSUB") {
        let map = if is(sub, "NUMSUB") {
            &registry.channels
        } else {
            &registry.shard_channels
        };
        reply.array((args.len() - 2) * 2);
        for name in &args[2..] {
            reply.bulk(name);
            count_reply(reply, map.get(name).map_or(0, Vec::len));
        }
    } else if is(sub, "NUMPAT") {
        if args.len() != 2 {
            return arity_error(reply);
        }
        count_reply(reply, registry.patterns.len());
    } else if is(sub, "HELP") {
        if args.len() != 2 {
            return arity_error(reply);
        }
        let lines = [
            "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
            "HELP",
            "    Prints this help.",
        ];
        reply.array(lines.len());
        for line in lines {
            reply.simple(line);
        }
    } else {
        reply.error(&format!(
            "ERR unknown subcommand '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(sub)
        ));
    }
}

/// `PING [message]` on a subscribed RESP2 connection: `*2 pong <message or "">`, since a
/// subscribed RESP2 client reads every frame as a push.
pub fn subscribed_ping(session: &Session, args: &[Bytes], reply: &mut Reply<'_>) -> bool {
    if session.protocol != Protocol::Resp2 || session.subscriptions.total() == 0 {
        return false;
    }
    reply.array(2);
    reply.bulk(b"pong");
    reply.bulk(args.get(1).map_or(&b""[..], |message| &message[..]));
    true
}
