//! Clients blocked on list keys (BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP), and the pushes that
//! wake them.
//!
//! Each cache key has a queue of the clients blocked on it, oldest first, as Redis keeps
//! `db->blocking_keys`. A push wakes only the client at the front of the queue, telling it
//! which key became ready; the client retries its command on that key. When a client leaves
//! a queue (served, timed out, disconnected) while it was at the front and a push may still
//! be unconsumed — it was served, or it had been woken and not retried — the next client in
//! line is woken for that key. So several pushes, or a push of several items, serve the
//! blocked clients one after the other in the order they blocked, as Redis'
//! `serveClientsBlockedOnListKey` does.
//!
//! Where Weft differs from Redis: Redis serves blocked clients inside the push's own event-loop
//! turn, before any other client runs; here the woken client runs its retry on its own task,
//! so a client that is not blocked (an `LPOP`, or a new `BLPOP` arriving) may take the item
//! first. The woken client then finds nothing and keeps its place at the front. No item is
//! ever lost or served twice: every pop happens under the key's segment lock.
//!
//! No lock is held while a client waits: the queues' mutex and a client's ready list are
//! taken only for a few pointer operations by pushes, registrations and departures.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// Blocked clients per key of one cache, each queue oldest first (never empty).
type Queues = HashMap<Bytes, VecDeque<Arc<Wakeup>>>;

/// A blocking command that found nothing: what the connection loop waits for.
#[derive(Debug)]
pub struct Block {
    /// The keys whose pushes wake the client.
    pub keys: Vec<Bytes>,
    /// When to give up (`None`: never).
    pub deadline: Option<Instant>,
    /// The command each retry runs instead of the one the client sent (XREAD's `$`
    /// resolved to the ID it stood for when the client blocked), if it differs.
    pub retry_args: Option<Vec<Bytes>>,
    /// Run the command again this often even without a push (XREADGROUP: its stream may be
    /// deleted or retyped, which pushes do not signal, and it must then fail).
    pub recheck: Option<std::time::Duration>,
    /// What the client is answered when the deadline passes (or CLIENT UNBLOCK TIMEOUT).
    pub on_timeout: TimeoutReply,
}

/// The answer of a blocked command whose time ran out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TimeoutReply {
    /// A null array: the blocking pops and reads.
    #[default]
    NullArray,
    /// An integer: WAIT's count of replicas.
    Integer(i64),
}

impl TimeoutReply {
    /// Writes the answer.
    pub fn write(self, reply: &mut crate::resp::Reply<'_>) {
        match self {
            Self::NullArray => reply.null_array(),
            Self::Integer(value) => reply.integer(value),
        }
    }
}

impl Block {
    /// A block on `keys` until `deadline`, woken by pushes only, retrying the same command.
    #[must_use]
    pub fn new(keys: Vec<Bytes>, deadline: Option<Instant>) -> Self {
        Self {
            keys,
            deadline,
            retry_args: None,
            recheck: None,
            on_timeout: TimeoutReply::NullArray,
        }
    }
}

/// What a blocked command knows when the connection loop runs it again.
#[derive(Debug)]
pub struct Retry {
    /// The deadline the first attempt set (a retry does not restart the timeout).
    pub deadline: Option<Instant>,
    /// The keys pushed to since the last attempt, in the order they were pushed to — Redis
    /// serves a woken client from the key that became ready. `None` on the first retry, which
    /// tries every key: a push may have come between the first attempt and registration.
    pub ready: Option<Vec<Bytes>>,
}

/// One blocked client's wake-up.
#[derive(Debug, Default)]
pub struct Wakeup {
    /// Keeps a permit, so a push between a retry and the next wait is not missed.
    notify: Notify,
    /// Keys pushed to and not yet retried, oldest first, without duplicates.
    ready: Mutex<Vec<Bytes>>,
}

impl Wakeup {
    /// Marks `key` ready and wakes the client.
    fn wake(&self, key: &[u8]) {
        {
            let mut ready = self.ready.lock();
            if !ready.iter().any(|pending| pending == key) {
                ready.push(Bytes::copy_from_slice(key));
            }
        }
        self.notify.notify_one();
    }
}

/// Every client blocked on a list key, server-wide.
#[derive(Debug, Default)]
pub struct Waiters {
    /// Queues per cache name, then per key.
    by_cache: Mutex<HashMap<Arc<str>, Queues>>,
    /// Clients blocked right now: pushes skip the mutex while there are none.
    ///
    /// A push reads it after its write; a client increments it before its retry reads the
    /// list. Both list accesses hold the key's segment lock, so when the retry misses the
    /// push, the push's read comes after the increment and sees it.
    blocked: AtomicUsize,
}

impl Waiters {
    /// Items were pushed onto the list at `key` of `cache`: wakes the oldest client blocked
    /// on it, if any. Cheap when nobody is blocked anywhere (one atomic load).
    pub fn signal(&self, cache: &str, key: &[u8]) {
        if self.blocked.load(Ordering::SeqCst) == 0 {
            return;
        }
        let by_cache = self.by_cache.lock();
        if let Some(front) = by_cache
            .get(cache)
            .and_then(|queues| queues.get(key))
            .and_then(VecDeque::front)
        {
            front.wake(key);
        }
    }

    /// Entries were added to the stream at `key` of `cache` (or its groups changed): wakes
    /// every client blocked on it, since reading a stream consumes nothing and each may be
    /// served (Redis' `serveClientsBlockedOnStreamKey` tries them all).
    pub fn signal_every(&self, cache: &str, key: &[u8]) {
        if self.blocked.load(Ordering::SeqCst) == 0 {
            return;
        }
        let by_cache = self.by_cache.lock();
        if let Some(queue) = by_cache.get(cache).and_then(|queues| queues.get(key)) {
            for wakeup in queue {
                wakeup.wake(key);
            }
        }
    }

    /// Every key of `cache` may hold something new (SWAPDB gave its database other
    /// contents): wakes every client blocked on any of them, to look again.
    pub fn signal_cache(&self, cache: &str) {
        if self.blocked.load(Ordering::SeqCst) == 0 {
            return;
        }
        let by_cache = self.by_cache.lock();
        if let Some(queues) = by_cache.get(cache) {
            for (key, queue) in queues {
                for wakeup in queue {
                    wakeup.wake(key);
                }
            }
        }
    }

    /// Queues a client behind those already blocked on each of `keys` (duplicates count
    /// once, as in Redis) until the returned registration is dropped.
    pub fn register(&self, cache: &str, mut keys: Vec<Bytes>) -> Registration<'_> {
        let mut seen = HashSet::with_capacity(keys.len());
        keys.retain(|key| seen.insert(key.clone()));
        let wakeup = Arc::new(Wakeup::default());
        let cache: Arc<str> = Arc::from(cache);
        {
            let mut by_cache = self.by_cache.lock();
            let queues = by_cache.entry(Arc::clone(&cache)).or_default();
            for key in &keys {
                queues
                    .entry(key.clone())
                    .or_default()
                    .push_back(Arc::clone(&wakeup));
            }
            self.blocked.fetch_add(1, Ordering::SeqCst);
        }
        Registration {
            waiters: self,
            cache,
            keys,
            wakeup,
            served: false,
        }
    }

    /// How many clients are blocked (INFO's `blocked_clients`).
    #[cfg(test)]
    #[must_use]
    pub fn blocked_clients(&self) -> usize {
        self.blocked.load(Ordering::SeqCst)
    }
}

/// A client's place in the queues of its keys; dropping it leaves them.
#[derive(Debug)]
pub struct Registration<'a> {
    waiters: &'a Waiters,
    cache: Arc<str>,
    keys: Vec<Bytes>,
    wakeup: Arc<Wakeup>,
    served: bool,
}

impl Registration<'_> {
    /// Waits for a push to one of the keys; returns the keys pushed to since the last call,
    /// oldest first (never empty).
    pub async fn notified(&self) -> Vec<Bytes> {
        loop {
            self.wakeup.notify.notified().await;
            let ready = std::mem::take(&mut *self.wakeup.ready.lock());
            if !ready.is_empty() {
                return ready;
            }
        }
    }

    /// The command answered: what it left in the lists goes to the next clients in line.
    pub fn served(&mut self) {
        self.served = true;
    }
}

impl Drop for Registration<'_> {
    /// Leaves every queue. Where this client was at the front and a push may be unconsumed
    /// (it was served and may have left items, or it was woken and did not retry), the next
    /// client in line is woken for that key.
    fn drop(&mut self) {
        let mut by_cache = self.waiters.by_cache.lock();
        // Taken under the queues' mutex, which every wake holds: none can slip in between.
        let pending = std::mem::take(&mut *self.wakeup.ready.lock());
        if let Some(queues) = by_cache.get_mut(&self.cache) {
            for key in &self.keys {
                let Some(queue) = queues.get_mut(key) else {
                    continue;
                };
                let was_front = queue
                    .front()
                    .is_some_and(|front| Arc::ptr_eq(front, &self.wakeup));
                if let Some(at) = queue.iter().position(|w| Arc::ptr_eq(w, &self.wakeup)) {
                    queue.remove(at);
                }
                match queue.front() {
                    None => {
                        queues.remove(key);
                    }
                    Some(next) if was_front && (self.served || pending.contains(key)) => {
                        next.wake(key);
                    }
                    Some(_) => {}
                }
            }
            if queues.is_empty() {
                by_cache.remove(&self.cache);
            }
        }
        self.waiters.blocked.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    fn ready(registration: &Registration<'_>) -> Vec<Bytes> {
        std::mem::take(&mut *registration.wakeup.ready.lock())
    }

    // Proves a push wakes only the oldest client blocked on the key, with the key it pushed.
    #[test]
    fn a_push_wakes_the_oldest_client_only() {
        let waiters = Waiters::default();
        let first = waiters.register("c", vec![b("k")]);
        let second = waiters.register("c", vec![b("k")]);
        waiters.signal("c", b"k");
        assert_eq!(ready(&first), vec![b("k")]);
        assert!(ready(&second).is_empty());
    }

    // Proves a served client hands the key on to the next one in line, and a client leaving
    // without having been woken does not.
    #[test]
    fn leaving_passes_an_unconsumed_push_on() {
        let waiters = Waiters::default();
        let mut first = waiters.register("c", vec![b("k"), b("j")]);
        let second = waiters.register("c", vec![b("k")]);
        let third = waiters.register("c", vec![b("j")]);
        first.served();
        drop(first);
        assert_eq!(ready(&second), vec![b("k")]);
        assert_eq!(ready(&third), vec![b("j")]);

        let quiet = waiters.register("c", vec![b("q")]);
        let behind = waiters.register("c", vec![b("q")]);
        drop(quiet);
        assert!(ready(&behind).is_empty());

        let woken = waiters.register("c", vec![b("w")]);
        let next = waiters.register("c", vec![b("w")]);
        waiters.signal("c", b"w");
        drop(woken);
        assert_eq!(ready(&next), vec![b("w")]);
    }

    // Proves registrations are per cache and per key, duplicates count once, and everything
    // is forgotten when the last client leaves.
    #[test]
    fn queues_are_per_cache_and_cleaned_up() {
        let waiters = Waiters::default();
        let one = waiters.register("c", vec![b("k"), b("k")]);
        let other = waiters.register("d", vec![b("k")]);
        assert_eq!(one.keys.len(), 1);
        waiters.signal("d", b"k");
        assert!(ready(&one).is_empty());
        assert_eq!(ready(&other), vec![b("k")]);
        assert_eq!(waiters.blocked_clients(), 2);
        drop(one);
        drop(other);
        assert_eq!(waiters.blocked_clients(), 0);
        assert!(waiters.by_cache.lock().is_empty());
    }

    // Proves a woken client learns the keys in the order they were pushed to, once each.
    #[tokio::test]
    async fn notified_reports_ready_keys_in_push_order() {
        let waiters = Waiters::default();
        let registration = waiters.register("c", vec![b("a"), b("b")]);
        waiters.signal("c", b"b");
        waiters.signal("c", b"a");
        waiters.signal("c", b"b");
        assert_eq!(registration.notified().await, vec![b("b"), b("a")]);
    }
}
