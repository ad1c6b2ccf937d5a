//! One RESP client's state: protocol version, selected database (cache), name, id, and
//! authentication; and command dispatch through the command table.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use weft_core::Cache;
use weft_resp::Protocol;

use super::commands::lists::{Block, Retry};
use super::commands::pubsub::{self, Subscriptions};
use super::commands::scripting;
use super::commands::tracking::{self, ClientTracking};
use super::push::Mailbox;
use super::reply::Reply;
use super::table;
use crate::ServerContext;

/// How long a command waits for the transaction gate before it looks again whether a
/// script holding it has turned busy.
const GATE_WAIT: std::time::Duration = std::time::Duration::from_millis(10);

/// How long a command waits for the transaction gate on its async worker before it moves
/// off it to wait longer.
const GATE_WAIT_HERE: std::time::Duration = std::time::Duration::from_millis(2);

/// A reply outgrew `client-output-bytes-max`: the connection is to be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimitExceeded {
    /// The limit in force, in bytes.
    pub limit: usize,
}

/// A RESP connection's state.
#[derive(Debug)]
pub struct Session {
    /// Server-wide state.
    pub context: Arc<ServerContext>,
    /// The cache of the selected database.
    pub cache: Cache,
    /// The selected database number.
    pub database: u32,
    /// RESP2 until HELLO 3.
    pub protocol: Protocol,
    /// CLIENT ID.
    pub client_id: u64,
    /// CLIENT SETNAME.
    pub client_name: Option<Bytes>,
    /// Whether AUTH succeeded (always true when no authentication is required).
    pub authenticated: bool,
    /// The credentials AUTH or HELLO presents, while they wait for the throttle's turn.
    pub auth_attempt: crate::security::Attempt,
    /// When AUTH or HELLO is to run again: the throttle deferred its credentials (the
    /// connection loop waits, then runs the same command).
    pub auth_wait: Option<std::time::Instant>,
    /// Who the client is: the user it authenticated as, or `default` when no
    /// authentication is required.
    pub subject: Option<weft_security::Subject>,
    /// The Redis ACL user the client is, whose rules restrict it; `None` for users of a
    /// users file (authorized by their roles alone).
    pub(crate) acl_user: Option<Arc<super::acl::User>>,
    /// Set by QUIT: close after flushing replies.
    pub quit: bool,
    /// The client's address.
    pub peer: SocketAddr,
    /// When the connection was opened.
    pub connected_at: Instant,
    /// The last command's name (Redis' `cmd=`). CLIENT INFO/LIST list only this connection,
    /// whose last command is the one running, so they do not read it yet.
    pub last_command: &'static str,
    /// Set by a blocking command that found nothing: the connection loop waits, then runs
    /// the command again.
    pub blocked: Option<Block>,
    /// While a blocked command is run again: its deadline and the keys pushed to.
    pub block_retry: Option<Retry>,
    /// Commands queued since MULTI.
    pub multi: Option<Multi>,
    /// True while EXEC runs the queued commands (and while a script runs a command).
    pub executing: bool,
    /// True while a script runs a command (`redis.call`).
    pub in_script: bool,
    /// While a script runs: the keys its EVAL or FCALL declared (what CLIENT TRACKING
    /// remembers once the script reads).
    pub script_keys: Vec<Bytes>,
    /// WATCHed keys: the cache, the database it served then, the key, and the key's version
    /// then (`None`: absent).
    pub watched: Vec<(Cache, u32, Bytes, Option<u64>)>,
    /// [`weft_core::CacheManager::resp_epoch`] when [`Session::cache`] was looked up: once
    /// SWAPDB changes it, the next command looks the database's cache up again.
    pub database_epoch: u64,
    /// A transaction EXEC sends to the member that owns all its keys (with [`Session::forward`]).
    pub transaction_elsewhere: Option<(Multi, Watched)>,
    /// Pushes for this connection: pub/sub messages and tracking invalidations.
    pub mailbox: Arc<Mailbox>,
    /// Channels and patterns subscribed to.
    pub subscriptions: Subscriptions,
    /// CLIENT TRACKING mode.
    pub tracking: ClientTracking,
    /// Set when the command just dispatched must run on another node (its keys' owner):
    /// the connection loop sends it there and appends the reply.
    pub forward: Option<Elsewhere>,
    /// This session runs commands another node forwarded: they run here, whoever owns
    /// their keys now (the sender routed them).
    pub forwarded: bool,
    /// CLIENT REPLY: whether replies are sent.
    pub reply_mode: ReplyMode,
    /// Set when the command just dispatched spans the cluster (DBSIZE, KEYS, FLUSHDB,
    /// FLUSHALL on a clustered cache): the connection loop asks the other nodes.
    pub cluster_wide: Option<Vec<Bytes>>,
}

/// CLIENT REPLY's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// Replies are sent.
    On,
    /// No replies are sent (pushes in RESP3 still are).
    Off,
    /// The command running now asked to skip the next command's reply (its own is not sent).
    SkipNext,
    /// This command's reply is not sent.
    Skip,
}

/// A command's full name as Redis' ACL names it: `get`, or `acl|list` for a container's
/// subcommand.
#[derive(Clone, Copy)]
struct FullName<'a>(&'a table::CommandSpec, &'a [Bytes]);

impl std::fmt::Display for FullName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        /// Redis' container commands: their subcommands are commands of their own to ACLs.
        const CONTAINERS: [&str; 8] = [
            "acl", "client", "cluster", "command", "config", "memory", "object", "pubsub",
        ];
        let FullName(spec, args) = *self;
        f.write_str(spec.name)?;
        if (!spec.subcommands.is_empty() || CONTAINERS.contains(&spec.name))
            && let Some(sub) = args.get(1)
        {
            write!(f, "|{}", String::from_utf8_lossy(sub).to_ascii_lowercase())?;
        }
        Ok(())
    }
}

/// A transaction being queued.
#[derive(Debug, Default)]
pub struct Multi {
    /// The queued commands.
    pub queued: Vec<Vec<Bytes>>,
    /// A command was refused while queueing: EXEC will abort.
    pub failed: bool,
}

/// Watched keys and the versions WATCH saw.
pub type Watched = Vec<(Bytes, Option<u64>)>;

/// A command whose keys another member owns: it runs there (see [`super::run_at_owner`]).
#[derive(Debug)]
pub struct Elsewhere {
    /// The key that routes it (its first).
    pub key: Bytes,
    /// Whether it may write (it then runs at the key's primary).
    pub write: bool,
    /// The command.
    pub args: Vec<Bytes>,
}

impl Session {
    /// A session on database 0; `None` if no cache is mapped to it.
    #[must_use]
    pub fn new(context: Arc<ServerContext>, peer: SocketAddr) -> Option<Self> {
        let database_epoch = context.manager.resp_epoch();
        // Database 0's cache, made now when SWAPDB gave it one nobody used since the start.
        let cache = context
            .manager
            .cache_for_resp_database(0)
            .or_else(|| super::commands::connection::database_cache_of(&context, 0))?;
        let client_id = context.next_client_id();
        let (acl_user, subject) = Self::identity_on_connect(&context);
        let authenticated = subject.is_some();
        let mailbox = Arc::new(Mailbox::for_connection(
            client_id,
            context.settings.pubsub_output_bytes_max,
            peer,
            context.local_addr,
        ));
        context.push.clients.register(&mailbox);
        Some(Self {
            context,
            cache,
            database: 0,
            protocol: Protocol::Resp2,
            client_id,
            client_name: None,
            authenticated,
            auth_attempt: crate::security::Attempt::default(),
            auth_wait: None,
            subject,
            acl_user,
            quit: false,
            peer,
            connected_at: Instant::now(),
            last_command: "",
            blocked: None,
            block_retry: None,
            multi: None,
            executing: false,
            in_script: false,
            script_keys: Vec::new(),
            watched: Vec::new(),
            database_epoch,
            transaction_elsewhere: None,
            mailbox,
            subscriptions: Subscriptions::default(),
            tracking: ClientTracking::default(),
            forward: None,
            forwarded: false,
            cluster_wide: None,
            reply_mode: ReplyMode::On,
        })
        .inspect(Session::publish_client_state)
    }

    /// A session that runs commands another member sent to their keys' owner, on `cache`.
    #[must_use]
    pub fn forwarded(context: Arc<ServerContext>, cache: Cache, resp3: bool) -> Option<Self> {
        let peer = context.local_addr;
        let mut session = Self::new(context, peer)?;
        session.mailbox.client.set_internal();
        // The client's ACL rules were checked where it is connected.
        session.acl_user = None;
        session.database = cache.config().resp_database.unwrap_or(0);
        session.cache = cache;
        session.protocol = if resp3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        session.forwarded = true;
        Some(session)
    }

    /// Where a command on `args` must run when the session's cache is clustered: `Ok(None)`
    /// here, `Ok(Some(key))` at the owner of its keys (`key`, the first, names it); an error
    /// when its keys live on different nodes (Redis Cluster's CROSSSLOT).
    fn owner(
        &self,
        spec: &table::CommandSpec,
        args: &[Bytes],
    ) -> Result<Option<Bytes>, &'static str> {
        use crate::cluster::routing::Route;
        if self.forwarded || spec.first_key <= 0 || !self.cache.config().mode.is_clustered() {
            return Ok(None);
        }
        // Shard channels name a slot, but a subscription lives with the client's connection
        // and a message reaches every node's subscribers (see `pubsub::publish_as`).
        if matches!(spec.name, "ssubscribe" | "sunsubscribe" | "spublish") {
            return Ok(None);
        }
        let Some(node) = &self.context.cluster else {
            return Ok(None);
        };
        let routing = node.routing();
        let write = spec.flags.contains(&"write");
        let len = i32::try_from(args.len()).unwrap_or(i32::MAX);
        let last = if spec.last_key < 0 {
            len + spec.last_key
        } else {
            spec.last_key
        };
        let step = spec.step.max(1);
        let mut target: Option<Route> = None;
        let mut first: Option<&Bytes> = None;
        let mut position = spec.first_key;
        while position <= last {
            let Some(key) = usize::try_from(position).ok().and_then(|i| args.get(i)) else {
                break;
            };
            let segment = self.cache.segment_of(key);
            let route = if write {
                routing.write_route(self.cache.name(), segment)
            } else {
                routing.read_route(self.cache.name(), segment)
            };
            first.get_or_insert(key);
            match &target {
                None => target = Some(route),
                Some(found) if *found == route => {}
                Some(_) => return Err("CROSSSLOT Keys in request don't hash to the same slot"),
            }
            position += step;
        }
        Ok(match target {
            Some(Route::Remote(..)) => first.cloned(),
            _ => None,
        })
    }

    /// Where a script or function whose declared keys are `keys` must run when the session's
    /// cache is clustered: `Ok(None)` here, `Ok(Some(key))` at their owner; an error when
    /// they live on different members (Redis Cluster's CROSSSLOT).
    pub fn owner_of_keys(&self, keys: &[Bytes]) -> Result<Option<Bytes>, &'static str> {
        use crate::cluster::routing::Route;
        if self.forwarded || self.executing || !self.cache.config().mode.is_clustered() {
            return Ok(None);
        }
        let Some(node) = &self.context.cluster else {
            return Ok(None);
        };
        let routing = node.routing();
        let mut target: Option<Route> = None;
        for key in keys {
            let route = routing.write_route(self.cache.name(), self.cache.segment_of(key));
            match &target {
                None => target = Some(route),
                Some(found) if *found == route => {}
                Some(_) => return Err("CROSSSLOT Keys in request don't hash to the same slot"),
            }
        }
        Ok(match target {
            Some(Route::Remote(..)) => keys.first().cloned(),
            _ => None,
        })
    }

    /// Where the keys `args` names (a command of `spec`) are written now, when the session's
    /// cache is clustered: `None` when it is not or the command names no key, `Some(None)`
    /// when its keys live on different members.
    pub fn route_of(
        &self,
        spec: &table::CommandSpec,
        args: &[Bytes],
    ) -> Option<Option<weft_grid::routing::Route>> {
        if spec.first_key <= 0 || !self.cache.config().mode.is_clustered() {
            return None;
        }
        let node = self.context.cluster.as_ref()?;
        let routing = node.routing();
        let len = i32::try_from(args.len()).unwrap_or(i32::MAX);
        let last = if spec.last_key < 0 {
            len + spec.last_key
        } else {
            spec.last_key
        };
        let mut route: Option<weft_grid::routing::Route> = None;
        let mut position = spec.first_key;
        while position <= last {
            let Some(key) = usize::try_from(position).ok().and_then(|i| args.get(i)) else {
                break;
            };
            let here = routing.write_route(self.cache.name(), self.cache.segment_of(key));
            match &route {
                None => route = Some(here),
                Some(found) if *found == here => {}
                Some(_) => return Some(None),
            }
            position += spec.step.max(1);
        }
        route.map(Some)
    }

    /// Executes one request and appends its reply to `output`.
    ///
    /// # Errors
    /// [`OutputLimitExceeded`] when the reply would take `output` past
    /// `client-output-bytes-max`; the partial reply is removed from `output` (replies to
    /// earlier requests stay) and the connection must be closed.
    pub fn execute(
        &mut self,
        args: &[Bytes],
        output: &mut BytesMut,
    ) -> Result<(), OutputLimitExceeded> {
        let start = output.len();
        let reply_before = self.reply_mode;
        let limit = self.context.settings.client_output_bytes_max;
        let mut reply = Reply::with_limit(output, self.protocol, start.saturating_add(limit));
        // EXEC runs alone; every other command may run beside the others (see `ServerContext::
        // transaction_gate`).
        let context = Arc::clone(&self.context);
        let protocol = self.protocol;
        // Writes made now are this client's own (CLIENT TRACKING NOLOOP).
        tracking::as_client(self.client_id, || {
            let name = args.first().map_or(&[][..], |name| &name[..]);
            let alone = scripting::runs_alone(name);
            // The common case: no script is busy and the gate is free.
            let busy = context.scripting.run.busy().is_some();
            if !busy {
                if alone {
                    if let Some(_exclusive) = context.transaction_gate.try_write() {
                        self.dispatch(args, &mut reply);
                        return;
                    }
                } else if let Some(_shared) = context.transaction_gate.try_read() {
                    self.dispatch(args, &mut reply);
                    return;
                }
            }
            // The gate is held (by a script, or EXEC): a short wait here; a longer one off
            // the async worker, whose other connections and I/O driver go to another thread
            // meanwhile. A script itself leaves the worker once it runs long (see
            // `scripting::Scripting`).
            // A busy script holds the gate: no use waiting for it here.
            let waited = if busy {
                None
            } else if alone {
                context
                    .transaction_gate
                    .try_write_for(GATE_WAIT_HERE)
                    .map(|g| {
                        self.dispatch(args, &mut reply);
                        drop(g);
                    })
            } else {
                context
                    .transaction_gate
                    .try_read_for(GATE_WAIT_HERE)
                    .map(|g| {
                        self.dispatch(args, &mut reply);
                        drop(g);
                    })
            };
            if waited.is_none() {
                crate::off_worker(|| self.wait_and_dispatch(args, &mut reply, alone));
            }
        });
        if self.protocol != protocol {
            self.mailbox.set_protocol(self.protocol);
        }
        // CLIENT CACHING applies to the next command, or to the next transaction.
        if self.multi.is_none()
            && !args
                .first()
                .is_some_and(|name| name.eq_ignore_ascii_case(b"client"))
        {
            self.tracking.caching = false;
        }
        let overflowed = reply.overflowed();
        if self.reply_mode != ReplyMode::On || reply_before != ReplyMode::On {
            // (Un)subscribing answers with pushes in RESP2 too (Redis' `CLIENT_PUSHING`).
            let subscribing = args.first().is_some_and(|name| {
                [
                    &b"subscribe"[..],
                    b"psubscribe",
                    b"ssubscribe",
                    b"unsubscribe",
                    b"punsubscribe",
                    b"sunsubscribe",
                ]
                .iter()
                .any(|command| name.eq_ignore_ascii_case(command))
            });
            self.apply_reply_mode(reply_before, output, start, subscribing);
        }
        if overflowed {
            output.truncate(start);
            return Err(OutputLimitExceeded { limit });
        }
        Ok(())
    }

    /// CLIENT REPLY after a command: drops its reply when replies are off or skipped (keeping
    /// pushes — RESP3's, and in RESP2 the (un)subscribe confirmations — which Redis sends
    /// whatever the mode), and moves SKIP on. A
    /// skipped command that turned replies ON (CLIENT REPLY ON) is answered: Redis clears
    /// the skip before that command replies.
    fn apply_reply_mode(
        &mut self,
        before: ReplyMode,
        output: &mut BytesMut,
        start: usize,
        subscribing: bool,
    ) {
        let suppress = (before == ReplyMode::Skip && self.reply_mode != ReplyMode::On)
            || matches!(self.reply_mode, ReplyMode::Off | ReplyMode::SkipNext);
        match self.reply_mode {
            ReplyMode::Skip if before == ReplyMode::Skip => self.reply_mode = ReplyMode::On,
            ReplyMode::SkipNext => self.reply_mode = ReplyMode::Skip,
            _ => {}
        }
        let pushes = match output.get(start) {
            Some(b'>') => self.protocol == Protocol::Resp3,
            Some(b'*') => subscribing,
            _ => false,
        };
        if suppress && !pushes {
            output.truncate(start);
        }
    }

    /// Publishes what CLIENT LIST shows of this connection to other connections.
    pub(crate) fn publish_client_state(&self) {
        let mut flags = String::new();
        if self.subscriptions.total() > 0 {
            flags.push('P');
        }
        if self.multi.is_some() {
            flags.push('x');
        }
        if self.tracking.on {
            flags.push('t');
            if self.tracking.bcast {
                flags.push('B');
            }
        }
        if flags.is_empty() {
            flags.push('N');
        }
        self.mailbox.client.show(super::clients::Shown {
            name: self
                .client_name
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default()
                .into_owned(),
            user: self
                .subject
                .as_ref()
                .map_or_else(|| "default".to_owned(), |subject| subject.name.to_string()),
            database: self.database,
            flags,
            subscriptions: (
                self.subscriptions.channel_count(),
                self.subscriptions.pattern_count(),
                self.subscriptions.shard_channel_count(),
            ),
            multi: self.multi.as_ref().map_or(-1, |multi| {
                i64::try_from(multi.queued.len()).unwrap_or(i64::MAX)
            }),
            protocol: if self.protocol == Protocol::Resp3 {
                3
            } else {
                2
            },
            redirect: super::commands::tracking::redirect_of(self),
        });
    }

    /// Runs a command once the transaction gate lets it (exclusively for EXEC and scripts),
    /// or answers BUSY when a script holding the gate has run past `busy-reply-threshold`
    /// — except for the commands Redis allows then (SCRIPT KILL among them), which run
    /// beside the script.
    fn wait_and_dispatch(&mut self, args: &[Bytes], reply: &mut Reply<'_>, alone: bool) {
        let context = Arc::clone(&self.context);
        let busy = || context.scripting.run.busy();
        loop {
            if let Some(error) = busy() {
                if scripting::allowed_while_busy(args) {
                    self.dispatch(args, reply);
                } else if let Some(spec) = args.first().and_then(|name| table::lookup(name)) {
                    // Refused as Redis' `rejectCommand`: a transaction being queued aborts,
                    // and EXEC discards it.
                    self.refuse(spec, error, reply);
                } else {
                    reply.error(error);
                }
                return;
            }
            if alone {
                if let Some(_exclusive) = context.transaction_gate.try_write_for(GATE_WAIT) {
                    self.dispatch(args, reply);
                    return;
                }
            } else if let Some(_shared) = context.transaction_gate.try_read_for(GATE_WAIT) {
                self.dispatch(args, reply);
                return;
            }
        }
    }

    /// After a SWAPDB, the selected database is served by another cache: looks it up again
    /// (one atomic load when nothing was swapped).
    pub(crate) fn follow_swapdb(&mut self) {
        let epoch = self.context.manager.resp_epoch();
        if epoch == self.database_epoch {
            return;
        }
        self.database_epoch = epoch;
        if let Some(cache) =
            super::commands::connection::database_cache_of(&self.context, self.database)
        {
            self.cache = cache;
        }
    }

    /// Whether MULTI is queueing commands (blocking commands then do not block).
    #[must_use]
    pub fn in_transaction(&self) -> bool {
        self.multi.is_some() || self.executing
    }

    /// Runs one command as EXEC does: no gate (EXEC holds it), no queueing.
    pub fn dispatch_queued(&mut self, args: &[Bytes], reply: &mut Reply<'_>) {
        self.dispatch(args, reply);
    }

    fn dispatch(&mut self, args: &[Bytes], reply: &mut Reply<'_>) {
        let Some(name) = args.first() else { return };
        self.follow_swapdb();
        let Some(spec) = table::lookup(name) else {
            reply.error(&table::unknown_command_error(args));
            self.context.command_stats.error("ERR");
            self.flag_transaction();
            return;
        };
        self.dispatch_command(spec, args, reply);
    }

    /// Runs one command as EXEC does (see [`Self::dispatch_queued`]), its description
    /// already looked up (`spec` is `args[0]`'s).
    pub fn dispatch_queued_command(
        &mut self,
        spec: &'static table::CommandSpec,
        args: &[Bytes],
        reply: &mut Reply<'_>,
    ) {
        self.follow_swapdb();
        self.dispatch_command(spec, args, reply);
    }

    fn dispatch_command(
        &mut self,
        spec: &'static table::CommandSpec,
        args: &[Bytes],
        reply: &mut Reply<'_>,
    ) {
        if let Err(error) = spec.check_arguments(args) {
            self.refuse(spec, &error, reply);
            return;
        }
        // A subscribed RESP2 client reads every frame as a push: only (un)subscribing, PING,
        // QUIT and RESET make sense (commands EXEC runs were checked when queued).
        if self.protocol == weft_resp::Protocol::Resp2
            && self.subscriptions.total() > 0
            && !self.executing
            && !pubsub::allowed_while_subscribed(spec)
            && let Some(error) = pubsub::refused_while_subscribed(spec, args)
        {
            self.refuse(spec, &error, reply);
            return;
        }
        // As Redis: authentication and permissions are checked before a command is queued.
        if !self.authenticated && !spec.allowed_unauthenticated() {
            self.refuse(spec, "NOAUTH Authentication required.", reply);
            return;
        }
        if let Err(error) = self.authorize(spec, args) {
            self.refuse(spec, &error, reply);
            return;
        }
        if self.multi.is_some() && !self.executing && spec.flags.contains(&"no_multi") {
            self.refuse(spec, "ERR Command not allowed inside a transaction", reply);
            return;
        }
        if self.multi.is_some() && !self.executing && !spec.runs_inside_multi() {
            if let Some(multi) = &mut self.multi {
                multi.queued.push(args.to_vec());
            }
            reply.simple("QUEUED");
            return;
        }
        match self.owner(spec, args) {
            Ok(None) => {}
            Ok(Some(key)) => {
                if self.in_script {
                    reply.error("ERR Script attempted to access a non local key in a cluster node");
                } else if self.executing {
                    reply.error(
                        "CROSSSLOT a transaction's keys must be owned by the node it runs on",
                    );
                } else {
                    // A read that runs at the keys' owner is tracked here, where the client
                    // is: the owner relays the events of later writes (see
                    // `weft_grid::events`).
                    self.last_command = spec.name;
                    tracking::after_command(self, spec, args);
                    self.forward = Some(Elsewhere {
                        key,
                        write: spec.flags.contains(&"write"),
                        args: args.to_vec(),
                    });
                }
                return;
            }
            Err(error) => {
                reply.error(error);
                self.flag_transaction();
                return;
            }
        }
        if !self.forwarded
            && !self.executing
            && (matches!(spec.name, "dbsize" | "keys" | "flushdb" | "flushall")
                || (spec.name == "scan"
                    && self.cache.config().key_partitioner == weft_core::KeyPartitioner::HotRod))
            && self.context.cluster.is_some()
            && self.cache.config().mode.is_clustered()
        {
            self.last_command = spec.name;
            self.cluster_wide = Some(args.to_vec());
            return;
        }
        self.last_command = spec.name;
        self.mailbox.client.ran(spec);
        let started = std::time::Instant::now();
        let reply_start = reply.written();
        let clustered = self.context.cluster.is_some()
            && !self.forwarded
            && !self.executing
            && spec.first_key > 0
            && self.cache.config().mode.is_clustered();
        if clustered {
            // The route said here, but the topology may have moved the key's segment away
            // before the write asked to be admitted: a command refused so before it changed
            // anything runs at the owner instead, as if routed there.
            let before = reply.written();
            let ((), seen) =
                weft_core::persistence::watch_admissions(|| (spec.handler)(self, args, reply));
            let first = usize::try_from(spec.first_key)
                .ok()
                .and_then(|i| args.get(i));
            if seen.refused_untouched()
                && let Some(key) = first
            {
                reply.truncate(before);
                self.forward = Some(Elsewhere {
                    key: key.clone(),
                    write: true,
                    args: args.to_vec(),
                });
                return;
            }
        } else {
            if super::monitor::is_script(spec) {
                self.feed_monitors(args);
            }
            let watched = super::commands::notify::before(self, spec, args);
            (spec.handler)(self, args, reply);
            if let Some(watched) = watched {
                super::commands::notify::after(self, spec, args, watched);
            }
        }
        let took = started.elapsed();
        // A blocked command is shown once, when it first runs, not again each time it is
        // tried while it waits (as Redis shows it).
        if super::monitor::shown_after(spec) && self.block_retry.is_none() {
            self.feed_monitors(args);
        }
        let context = Arc::clone(&self.context);
        context
            .telemetry
            .observe(crate::telemetry::Protocol::Resp, spec.name, took);
        // A command that blocked is counted once, when it is answered (as Redis counts it).
        if self.blocked.is_none() {
            context
                .command_stats
                .ran(spec, took, reply.error_code_at(reply_start));
        }
        context.latency.command(spec, took);
        // Credentials never reach the log; EXEC's commands are timed themselves.
        if context.slowlog.enabled()
            && !spec.flags.contains(&"skip-slowlog")
            && !matches!(spec.name, "auth" | "hello" | "acl")
        {
            context.slowlog.record(self, args, took);
        }
        tracking::after_command(self, spec, args);
        if changes_client_state(spec.name) {
            self.publish_client_state();
        }
    }

    /// Who a connection is before AUTH: Redis' `default` user when it is an ACL user
    /// (authenticated when it is on and needs no password), else the server's anonymous
    /// subject.
    pub(crate) fn identity_on_connect(
        context: &ServerContext,
    ) -> (
        Option<Arc<super::acl::User>>,
        Option<weft_security::Subject>,
    ) {
        match context.acl.on_connect() {
            Some((user, open)) => {
                let subject = open.then(|| context.security.acl_subject(user.name()));
                (Some(user), subject)
            }
            None => (None, context.security.anonymous()),
        }
    }

    /// Whether the client's ACL rules let it run the call (always for users of a users
    /// file); why not otherwise.
    pub(crate) fn acl_check(
        &self,
        spec: &table::CommandSpec,
        args: &[Bytes],
    ) -> Result<(), super::acl::Denial> {
        match &self.acl_user {
            Some(user) => user.check(spec, args),
            None => Ok(()),
        }
    }

    /// Records a refusal in the ACL log.
    pub(crate) fn acl_log(&self, reason: super::acl::Reason, object: &[u8], user: &[u8]) {
        use super::acl::Context;
        let context = if self.in_script {
            Context::Lua
        } else if self.multi.is_some() {
            Context::Multi
        } else {
            Context::Toplevel
        };
        let info = super::commands::connection::client_info_line(self, self.last_command, &[]);
        self.context.acl.log(reason, context, object, user, info);
    }

    /// Whether the client's user may run the command (`crate::authorization`'s table), on
    /// the selected database's cache or, for FLUSHALL, on every database's; Redis' NOPERM
    /// otherwise.
    pub(crate) fn authorize(
        &self,
        spec: &table::CommandSpec,
        args: &[Bytes],
    ) -> Result<(), String> {
        self.authorize_roles(spec, args)?;
        if let Err(denial) = self.acl_check(spec, args) {
            let (reason, object) = super::acl::logged(denial, spec, args);
            let user = self.acl_user.as_ref().map_or(&b"default"[..], |u| u.name());
            self.acl_log(reason, &object, user);
            return Err(if self.in_script {
                format!("ERR {}", super::acl::script_refusal(denial))
            } else {
                super::acl::refusal(denial, spec, args)
            });
        }
        Ok(())
    }

    /// The role check alone (`crate::authorization`); Redis' NOPERM otherwise.
    pub(crate) fn authorize_roles(
        &self,
        spec: &table::CommandSpec,
        args: &[Bytes],
    ) -> Result<(), String> {
        use crate::authorization::{self, Need};
        let security = &self.context.security;
        if !security.authorizes() {
            return Ok(());
        }
        let need = authorization::resp(spec, args);
        let name = FullName(spec, args);
        let subject = self.subject.as_ref();
        let allowed = match need {
            Need::Nothing => true,
            Need::EveryDatabase(_) => self
                .context
                .manager
                .caches()
                .iter()
                .filter(|cache| cache.config().resp_database.is_some())
                .all(|cache| {
                    security
                        .authorize(
                            subject,
                            "RESP",
                            name,
                            need,
                            Some((cache.name(), cache.config())),
                        )
                        .is_ok()
                }),
            _ => security
                .authorize(
                    subject,
                    "RESP",
                    name,
                    need,
                    Some((self.cache.name(), self.cache.config())),
                )
                .is_ok(),
        };
        if allowed {
            Ok(())
        } else {
            // Redis 7.0's words.
            Err(format!(
                "NOPERM this user has no permissions to run the '{name}' command"
            ))
        }
    }

    /// A command refused before it runs (Redis' `rejectCommand`): a transaction being queued
    /// will abort, and a refused EXEC discards it at once, saying why.
    /// Shows the command to the connections in MONITOR mode, if any.
    fn feed_monitors(&self, args: &[Bytes]) {
        let monitors = &self.context.push.monitors;
        if monitors.any() {
            let origin = (!self.in_script).then_some(self.peer);
            monitors.feed(self.database, origin, args);
        }
    }

    fn refuse(&mut self, spec: &table::CommandSpec, error: &str, reply: &mut Reply<'_>) {
        let code = error.split(' ').next().unwrap_or("ERR");
        self.context.command_stats.rejected(spec, code);
        if spec.name == "exec" && !self.executing {
            self.multi = None;
            self.watched.clear();
            // MONITOR shows the EXEC that ended the transaction.
            self.feed_monitors(&[Bytes::from_static(b"exec")]);
            let reason = error.strip_prefix("ERR ").unwrap_or(error);
            reply.error(&format!(
                "EXECABORT Transaction discarded because of: {reason}"
            ));
            return;
        }
        reply.error(error);
        self.flag_transaction();
    }

    /// A command refused while MULTI queues makes EXEC abort.
    fn flag_transaction(&mut self) {
        if let Some(multi) = &mut self.multi
            && !self.executing
        {
            multi.failed = true;
        }
    }
}

impl Drop for Session {
    /// The connection is gone: its subscriptions, tracking and mailbox go with it.
    fn drop(&mut self) {
        pubsub::unsubscribe_all(self);
        tracking::disable(self);
        self.context.push.clients.unregister(self.client_id);
        self.context.push.monitors.remove(self.client_id);
    }
}

/// Whether a command may change what CLIENT LIST shows of the connection (its name, user,
/// database, flags, subscriptions, transaction, protocol).
fn changes_client_state(name: &str) -> bool {
    matches!(
        name,
        "select"
            | "client"
            | "hello"
            | "auth"
            | "reset"
            | "multi"
            | "exec"
            | "discard"
            | "subscribe"
            | "unsubscribe"
            | "psubscribe"
            | "punsubscribe"
            | "ssubscribe"
            | "sunsubscribe"
    )
}
