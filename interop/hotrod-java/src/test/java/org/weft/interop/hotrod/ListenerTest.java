package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.Flag;
import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.annotation.ClientCacheEntryCreated;
import org.infinispan.client.hotrod.annotation.ClientCacheEntryExpired;
import org.infinispan.client.hotrod.annotation.ClientCacheEntryModified;
import org.infinispan.client.hotrod.annotation.ClientCacheEntryRemoved;
import org.infinispan.client.hotrod.annotation.ClientListener;
import org.infinispan.client.hotrod.event.ClientCacheEntryCreatedEvent;
import org.infinispan.client.hotrod.event.ClientCacheEntryExpiredEvent;
import org.infinispan.client.hotrod.event.ClientCacheEntryModifiedEvent;
import org.infinispan.client.hotrod.event.ClientCacheEntryRemovedEvent;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * @ClientListener events (ADD_CLIENT_LISTENER, event frames 0x60-0x63 pushed on the registering
 * connection, REMOVE_CLIENT_LISTENER) on cache `protostream`.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ListenerTest extends HotRodTestBase {
   private static final Duration EVENT_WAIT = Duration.ofSeconds(10);

   /** One received event, reduced to what the tests compare. Version is -1 for removed/expired. */
   record Event(String type, Object key, long version) {
      @Override
      public String toString() {
         return type + "(" + key + (version == -1 ? "" : ", v" + version) + ")";
      }
   }

   /** Records every event in arrival order. Concrete subclasses carry the @ClientListener annotation. */
   public abstract static class Recorder {
      final BlockingQueue<Event> events = new LinkedBlockingQueue<>();

      @ClientCacheEntryCreated
      public void created(ClientCacheEntryCreatedEvent<Object> e) {
         events.add(new Event("created", e.getKey(), e.getVersion()));
      }

      @ClientCacheEntryModified
      public void modified(ClientCacheEntryModifiedEvent<Object> e) {
         events.add(new Event("modified", e.getKey(), e.getVersion()));
      }

      @ClientCacheEntryRemoved
      public void removed(ClientCacheEntryRemovedEvent<Object> e) {
         events.add(new Event("removed", e.getKey(), -1));
      }

      @ClientCacheEntryExpired
      public void expired(ClientCacheEntryExpiredEvent<Object> e) {
         events.add(new Event("expired", e.getKey(), -1));
      }

      /** The next event, waiting up to EVENT_WAIT. */
      Event next(String waitingFor) {
         try {
            Event event = events.poll(EVENT_WAIT.toMillis(), TimeUnit.MILLISECONDS);
            if (event == null) {
               fail("no event within " + EVENT_WAIT.toSeconds() + " s while waiting for " + waitingFor);
            }
            return event;
         } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RuntimeException(e);
         }
      }
   }

   @ClientListener
   public static class Plain extends Recorder {
   }

   @ClientListener(includeCurrentState = true)
   public static class WithCurrentState extends Recorder {
   }

   private RemoteCache<String, String> cache;
   private final List<Object> registered = new ArrayList<>();
   private int sentinels;

   @BeforeEach
   void clear() {
      cache = cache(Weft.PROTOSTREAM);
      cache.clear();
   }

   @AfterEach
   void removeListeners() {
      for (Object listener : registered) {
         cache.removeClientListener(listener);
      }
      registered.clear();
   }

   private <L extends Recorder> L register(L listener) {
      cache.addClientListener(listener);
      registered.add(listener);
      return listener;
   }

   /**
    * Writes a fresh sentinel key and consumes events up to its created event; returns the events
    * that came before it. Events from one connection arrive in order, so after this nothing earlier
    * is still in flight.
    */
   private List<Event> drainUntilSentinel(Recorder recorder) {
      String sentinel = "sentinel-" + (++sentinels);
      cache.put(sentinel, "s");
      List<Event> before = new ArrayList<>();
      while (true) {
         Event event = recorder.next("the created event of " + sentinel + " (after " + before + ")");
         if (event.type().equals("created") && sentinel.equals(event.key())) {
            return before;
         }
         before.add(event);
      }
   }

   private long version(String key) {
      return cache.getWithMetadata(key).getVersion();
   }

   @Test
   void createdModifiedRemovedWithVersions() {
      Plain listener = register(new Plain());
      cache.put("k", "v1");
      long v1 = version("k");
      assertEquals(new Event("created", "k", v1), listener.next("created k"));
      cache.put("k", "v2");
      long v2 = version("k");
      assertEquals(new Event("modified", "k", v2), listener.next("modified k by put"));
      cache.replace("k", "v3");
      long v3 = version("k");
      assertEquals(new Event("modified", "k", v3), listener.next("modified k by replace"));
      assertTrue(cache.replaceWithVersion("k", "v4", v3));
      assertEquals(new Event("modified", "k", version("k")), listener.next("modified k by replaceWithVersion"));
      cache.remove("k");
      assertEquals(new Event("removed", "k", -1), listener.next("removed k"));
      assertEquals(List.of(), drainUntilSentinel(listener), "no further events");
   }

   @Test
   void conditionalWritesThatDoNothingRaiseNoEvents() {
      cache.put("k", "v");
      Plain listener = register(new Plain());
      cache.putIfAbsent("k", "other");
      cache.replace("absent", "x");
      cache.remove("absent");
      cache.replaceWithVersion("k", "x", version("k") + 12345);
      cache.removeWithVersion("k", version("k") + 12345);
      assertEquals(List.of(), drainUntilSentinel(listener));
      assertEquals("v", cache.get("k"));
   }

   @Test
   void expiredEvent() {
      Plain listener = register(new Plain());
      cache.put("short", "v", 1, TimeUnit.SECONDS);
      assertEquals(new Event("created", "short", version("short")), listener.next("created short"));
      // Reads of an expired entry drop it (and raise the event) if the reaper has not yet.
      Weft.await("short to expire", Duration.ofSeconds(15), () -> cache.get("short") == null);
      Event event = listener.next("expired short");
      assertEquals(new Event("expired", "short", -1), event);
      assertEquals(List.of(), drainUntilSentinel(listener), "one expired event, no removed event");
   }

   @Test
   void includeCurrentStateSendsCreatedForExistingEntries() {
      Map<String, Long> existing = new HashMap<>();
      for (int i = 0; i < 20; i++) {
         cache.put("pre-" + i, "v" + i);
         existing.put("pre-" + i, version("pre-" + i));
      }
      WithCurrentState listener = register(new WithCurrentState());
      Map<Object, Long> received = new HashMap<>();
      for (int i = 0; i < existing.size(); i++) {
         Event event = listener.next("current-state event " + (i + 1) + " of " + existing.size());
         assertEquals("created", event.type(), event.toString());
         assertEquals(null, received.put(event.key(), event.version()), "duplicate " + event);
      }
      assertEquals(existing, received);
      cache.put("pre-0", "changed");
      assertEquals(new Event("modified", "pre-0", version("pre-0")), listener.next("live event after current state"));
      assertEquals(List.of(), drainUntilSentinel(listener));
   }

   @Test
   void plainListenerDoesNotReplayExistingEntries() {
      cache.put("old-1", "v");
      cache.put("old-2", "v");
      Plain listener = register(new Plain());
      assertEquals(List.of(), drainUntilSentinel(listener));
   }

   @Test
   void removedListenerGetsNoMoreEvents() {
      Plain removed = register(new Plain());
      Plain kept = register(new Plain());
      cache.put("a", "1");
      assertEquals("created", removed.next("created a").type());
      assertEquals("created", kept.next("created a").type());
      cache.removeClientListener(removed);
      registered.remove(removed);
      cache.put("a", "2");
      cache.put("b", "1");
      cache.remove("a");
      List<Event> keptEvents = drainUntilSentinel(kept);
      assertEquals(3, keptEvents.size(), keptEvents.toString());
      Weft.sleep(300);
      assertTrue(removed.events.isEmpty(), "events after removeClientListener: " + removed.events);
   }

   @Test
   void eventsInterleaveWithOrdinaryOperationsOnTheSameCache() {
      Plain listener = register(new Plain());
      int writes = 500;
      for (int i = 0; i < writes; i++) {
         cache.put("il-" + i, "v" + i);
         assertEquals("v" + i, cache.get("il-" + i));
         assertTrue(cache.containsKey("il-" + i));
      }
      Set<Object> created = new HashSet<>();
      for (Event event : drainUntilSentinel(listener)) {
         assertEquals("created", event.type(), event.toString());
         assertTrue(created.add(event.key()), "duplicate " + event);
      }
      assertEquals(writes, created.size());
      assertEquals(writes + 1, cache.size());
   }

   @Test
   void putAllRaisesOneCreatedEventPerKey() {
      Plain listener = register(new Plain());
      Map<String, String> entries = new HashMap<>();
      for (int i = 0; i < 100; i++) {
         entries.put("pa-" + i, "v" + i);
      }
      cache.putAll(entries);
      Set<Object> keys = new HashSet<>();
      for (Event event : drainUntilSentinel(listener)) {
         assertEquals("created", event.type(), event.toString());
         keys.add(event.key());
      }
      assertEquals(entries.keySet(), keys);
   }

   @Test
   void skipListenerNotificationFlagSuppressesEvents() {
      Plain listener = register(new Plain());
      // Per call: the 15.0 client's withFlags applies to the next operation only.
      cache.withFlags(Flag.SKIP_LISTENER_NOTIFICATION).put("q", "1");
      cache.withFlags(Flag.SKIP_LISTENER_NOTIFICATION).put("q", "2");
      cache.withFlags(Flag.SKIP_LISTENER_NOTIFICATION).remove("q");
      assertEquals(List.of(), drainUntilSentinel(listener));
   }

   @Test
   void listenerOnAnotherManagerSeesThisManagersWrites() {
      try (var other = Weft.manager()) {
         RemoteCache<String, String> otherCache = other.getCache(Weft.PROTOSTREAM);
         assertNotNull(otherCache);
         Plain listener = new Plain();
         otherCache.addClientListener(listener);
         try {
            cache.put("x", "1");
            assertEquals(new Event("created", "x", version("x")), listener.next("created x from the other manager"));
            cache.remove("x");
            assertEquals(new Event("removed", "x", -1), listener.next("removed x"));
         } finally {
            otherCache.removeClientListener(listener);
         }
      }
   }
}
