package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.infinispan.client.hotrod.annotation.ClientCacheEntryCreated;
import org.infinispan.client.hotrod.annotation.ClientCacheEntryModified;
import org.infinispan.client.hotrod.annotation.ClientCacheEntryRemoved;
import org.infinispan.client.hotrod.annotation.ClientListener;
import org.infinispan.client.hotrod.configuration.ClientIntelligence;
import org.infinispan.client.hotrod.configuration.ConfigurationBuilder;
import org.infinispan.client.hotrod.configuration.NearCacheMode;
import org.infinispan.client.hotrod.event.ClientCacheEntryCreatedEvent;
import org.infinispan.client.hotrod.event.ClientCacheEntryModifiedEvent;
import org.infinispan.client.hotrod.event.ClientCacheEntryRemovedEvent;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Cluster-wide events with the official client on three Weft nodes (interop/with_weft_cluster.py
 * sets WEFT_SERVERS): a near cache, and a client listener, registered through node A see the
 * writes another client makes through node C. The cache has two owners of each key among three
 * nodes, so most of the keys written have a primary other than A: their events reach A only
 * because the cluster relays them (40 keys all owned by A has a chance of (2/3)^40).
 */
@EnabledIfEnvironmentVariable(named = "WEFT_SERVERS", matches = ".+")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ClusterNearCacheTest {
   /** The distributed cache declared in cluster.toml. */
   private static final String DIST = "dist";
   private static final int KEYS = 40;
   /** How long a write through node C may take to reach what the client on node A sees. */
   private static final Duration PROPAGATION = Duration.ofSeconds(1);
   /** How long the last event may take to arrive; then how long to watch for duplicates. */
   private static final Duration EVENT_WAIT = Duration.ofSeconds(5);
   private static final Duration QUIET = Duration.ofMillis(300);

   private List<String> servers;
   private final List<RemoteCacheManager> managers = new ArrayList<>();
   /** Connected only to node C, with BASIC intelligence: every write goes through C. */
   private RemoteCache<String, String> writerOnC;

   @BeforeAll
   void open() {
      servers = List.of(System.getenv("WEFT_SERVERS").split(";"));
      assertEquals(3, servers.size(), "WEFT_SERVERS: " + servers);
      writerOnC = manager(servers.get(2), ClientIntelligence.BASIC, builder -> {
      }).getCache(DIST);
      assertNotNull(writerOnC, "getCache(\"" + DIST + "\") through node C");
   }

   @AfterAll
   void close() {
      for (RemoteCacheManager manager : managers) {
         manager.close();
      }
   }

   /** A manager given one server address, closed after the class. */
   private RemoteCacheManager manager(String server, ClientIntelligence intelligence,
         Consumer<ConfigurationBuilder> customize) {
      ConfigurationBuilder builder = new ConfigurationBuilder();
      builder.addServers(server).clientIntelligence(intelligence);
      builder.socketTimeout(20_000).connectionTimeout(5_000);
      customize.accept(builder);
      RemoteCacheManager manager = new RemoteCacheManager(builder.build());
      managers.add(manager);
      return manager;
   }

   /**
    * BASIC: the client only ever talks to node A, which must relay the events of the keys the
    * other nodes are primary of. HASH_DISTRIBUTION_AWARE (the default): the client learns the
    * topology from A and connects to every node, while its near cache's listener stays on one.
    */
   @ParameterizedTest
   @EnumSource(value = ClientIntelligence.class, names = {"BASIC", "HASH_DISTRIBUTION_AWARE"})
   void nearCacheOnNodeASeesWritesThroughNodeCWithinASecond(ClientIntelligence intelligence) {
      String prefix = Weft.unique("near-" + intelligence.name().toLowerCase());
      RemoteCache<String, String> near = manager(servers.get(0), intelligence, builder -> {
         builder.statistics().enable();
         builder.remoteCache(DIST).nearCacheMode(NearCacheMode.INVALIDATED).nearCacheMaxEntries(1_000);
      }).getCache(DIST);
      assertNotNull(near, "getCache(\"" + DIST + "\") through node A");
      List<String> keys = new ArrayList<>();
      for (int i = 0; i < KEYS; i++) {
         keys.add(prefix + "-" + i);
         writerOnC.put(keys.get(i), "v1");
      }
      for (String key : keys) {
         assertEquals("v1", near.get(key), key);
      }
      long hitsBefore = near.clientStatistics().getNearCacheHits();
      for (String key : keys) {
         assertEquals("v1", near.get(key), key + ", second read");
      }
      assertEquals(KEYS, near.clientStatistics().getNearCacheHits() - hitsBefore,
            "the second reads were not all served by the near cache");

      for (String key : keys) {
         writerOnC.put(key, "v2");
      }
      awaitAll(near, keys, "v2", "an overwrite through node C");
      assertTrue(near.clientStatistics().getNearCacheInvalidations() >= KEYS,
            "near cache invalidations: " + near.clientStatistics().getNearCacheInvalidations());

      // Read again (near-cached once more), then removed through node C.
      for (String key : keys) {
         assertEquals("v2", near.get(key), key);
      }
      for (String key : keys) {
         writerOnC.remove(key);
      }
      awaitAll(near, keys, null, "a remove through node C");
   }

   /** Polls every key until all read `expected`; fails if any still does not after PROPAGATION. */
   private static void awaitAll(RemoteCache<String, String> near, List<String> keys, String expected, String after) {
      long deadline = System.nanoTime() + PROPAGATION.toNanos();
      Map<String, String> stale = new HashMap<>();
      while (true) {
         stale.clear();
         for (String key : keys) {
            String read = near.get(key);
            if (!java.util.Objects.equals(expected, read)) {
               stale.put(key, read);
            }
         }
         if (stale.isEmpty()) {
            return;
         }
         if (System.nanoTime() > deadline) {
            fail(stale.size() + " of " + keys.size() + " keys still read stale from node A's near cache "
                  + PROPAGATION.toMillis() + " ms after " + after + ", e.g. "
                  + stale.entrySet().stream().limit(5).toList());
         }
         Weft.sleep(20);
      }
   }

   /** One received event, reduced to what the test compares. */
   record Event(String type, String key) {
   }

   @ClientListener
   public static class Recorder {
      final BlockingQueue<Event> events = new LinkedBlockingQueue<>();

      @ClientCacheEntryCreated
      public void created(ClientCacheEntryCreatedEvent<String> e) {
         events.add(new Event("created", e.getKey()));
      }

      @ClientCacheEntryModified
      public void modified(ClientCacheEntryModifiedEvent<String> e) {
         events.add(new Event("modified", e.getKey()));
      }

      @ClientCacheEntryRemoved
      public void removed(ClientCacheEntryRemovedEvent<String> e) {
         events.add(new Event("removed", e.getKey()));
      }
   }

   @Test
   void listenerOnNodeAReceivesEventsOfWritesThroughNodeC() throws InterruptedException {
      String prefix = Weft.unique("listened");
      RemoteCache<String, String> onA = manager(servers.get(0), ClientIntelligence.BASIC, builder -> {
      }).getCache(DIST);
      assertNotNull(onA, "getCache(\"" + DIST + "\") through node A");
      Recorder recorder = new Recorder();
      onA.addClientListener(recorder);
      try {
         List<String> keys = new ArrayList<>();
         for (int i = 0; i < KEYS; i++) {
            keys.add(prefix + "-" + i);
         }
         for (String key : keys) {
            writerOnC.put(key, "v1");
         }
         for (String key : keys) {
            writerOnC.put(key, "v2");
         }
         for (String key : keys) {
            writerOnC.remove(key);
         }
         // Only this test's keys: events of other writes to the cache are not ours to count.
         Map<String, List<String>> byKey = new HashMap<>();
         int expected = 3 * KEYS;
         int received = 0;
         long deadline = System.nanoTime() + EVENT_WAIT.toNanos();
         while (received < expected) {
            long left = deadline - System.nanoTime();
            Event event = recorder.events.poll(Math.max(left, 0), TimeUnit.NANOSECONDS);
            if (event == null) {
               break;
            }
            if (event.key().startsWith(prefix + "-")) {
               byKey.computeIfAbsent(event.key(), k -> new ArrayList<>()).add(event.type());
               received++;
            }
         }
         // Then nothing more: each write's event arrives once.
         Event extra;
         while ((extra = recorder.events.poll(QUIET.toMillis(), TimeUnit.MILLISECONDS)) != null) {
            if (extra.key().startsWith(prefix + "-")) {
               byKey.computeIfAbsent(extra.key(), k -> new ArrayList<>()).add(extra.type());
            }
         }
         Map<String, List<String>> wrong = new HashMap<>();
         for (String key : keys) {
            List<String> seen = byKey.getOrDefault(key, List.of());
            // Writes to one key go through one node to one primary: their events stay in order.
            if (!seen.equals(List.of("created", "modified", "removed"))) {
               wrong.put(key, seen);
            }
         }
         assertTrue(wrong.isEmpty(), wrong.size() + " of " + KEYS + " keys' events (want created, modified,"
               + " removed) differ, e.g. " + wrong.entrySet().stream().limit(5).toList());
      } finally {
         onA.removeClientListener(recorder);
      }
   }
}
