package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.infinispan.client.hotrod.configuration.ConfigurationBuilder;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * The official client against a cluster of Weft nodes (interop/with_weft_cluster.py sets
 * WEFT_SERVERS and WEFT_PIDS): it must send each keyed operation to the key's primary owner,
 * measured by what the nodes forwarded, and lose no acknowledged write when a node is killed
 * with SIGKILL in the middle of a run.
 */
@EnabledIfEnvironmentVariable(named = "WEFT_SERVERS", matches = ".+")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ClusterTest {
   /** The distributed cache declared in cluster.toml (ProtoStream keys: the client's hash). */
   static final String DIST = "dist";
   /** A distributed cache storing raw bytes, as RESP-facing caches do: the client hashes other bytes. */
   static final String DIST_OCTETS = "dist-octets";

   private final HttpClient http = HttpClient.newHttpClient();
   private List<String> servers;
   private RemoteCacheManager rcm;
   private RemoteCache<String, String> cache;

   @BeforeAll
   void open() {
      servers = List.of(System.getenv("WEFT_SERVERS").split(";"));
      ConfigurationBuilder builder = new ConfigurationBuilder();
      builder.addServers(String.join(";", servers));
      builder.socketTimeout(20_000).connectionTimeout(5_000).maxRetries(10);
      rcm = new RemoteCacheManager(builder.build());
      cache = rcm.getCache(DIST);
   }

   @AfterAll
   void close() {
      if (rcm != null) {
         rcm.close();
      }
   }

   /** Requests the nodes still up forwarded to another node, summed. */
   private long forwarded() {
      long total = 0;
      for (String server : servers) {
         try {
            HttpResponse<String> metrics = http.send(
                  HttpRequest.newBuilder(URI.create("http://" + server + "/metrics")).timeout(Duration.ofSeconds(5)).build(),
                  HttpResponse.BodyHandlers.ofString());
            for (String line : metrics.body().split("\n")) {
               if (line.startsWith("weft_cluster_forwarded_total{protocol=\"hotrod\"}")) {
                  total += Long.parseLong(line.substring(line.lastIndexOf(' ') + 1).trim());
               }
            }
         } catch (Exception down) {
            // A node killed by the other test: it forwards nothing any more.
         }
      }
      return total;
   }

   @Test
   @Order(1)
   void keyedOperationsGoToThePrimaryOwner() {
      // The first responses bring the topology; from then on the client hashes keys itself
      // (it connects to the other servers as it needs them).
      for (int i = 0; i < 50; i++) {
         cache.put("warm-up-" + i, "x");
      }
      int keys = 5_000;
      long before = forwarded();
      for (int i = 0; i < keys; i++) {
         cache.put("primary-" + i, "value-" + i);
      }
      for (int i = 0; i < keys; i++) {
         assertEquals("value-" + i, cache.get("primary-" + i));
      }
      long hops = forwarded() - before;
      double ratio = 1.0 - hops / (2.0 * keys);
      System.out.printf("cluster: %d keyed operations, %d forwarded, %.4f went straight to the primary owner%n",
            2 * keys, hops, ratio);
      assertTrue(ratio >= 0.99, "only " + ratio + " of keyed operations reached the primary owner");
   }

   @Test
   @Order(2)
   void iterationReturnsEveryEntryOnceAcrossTheCluster() {
      // The client iterates segment by segment on the servers that own them; each server
      // reads what it does not own from the members that do.
      int keys = 3_000;
      for (int i = 0; i < keys; i++) {
         cache.put("iterated-" + i, "value-" + i);
      }
      Map<String, String> seen = new java.util.HashMap<>();
      List<String> twice = new ArrayList<>();
      try (var entries = cache.retrieveEntries(null, 97)) {
         while (entries.hasNext()) {
            Map.Entry<Object, Object> entry = entries.next();
            if (seen.put((String) entry.getKey(), (String) entry.getValue()) != null) {
               twice.add((String) entry.getKey());
            }
         }
      }
      assertTrue(twice.isEmpty(), twice.size() + " entries iterated twice, e.g. " + twice.stream().limit(5).toList());
      for (int i = 0; i < keys; i++) {
         assertEquals("value-" + i, seen.get("iterated-" + i), "iterated-" + i);
      }
      assertEquals(cache.size(), seen.size(), "iteration and SIZE disagree");
      Set<Object> keySet = new HashSet<>(cache.keySet());
      assertEquals(seen.keySet(), keySet, "keySet differs from the entries iterated");
      System.out.printf("cluster: iterated %d entries, each once%n", seen.size());
   }

   @Test
   @Order(2)
   void iterationOnAnOctetStreamCacheReturnsEveryEntryOnceWithItsType() {
      // The client hashes the ProtoStream bytes it receives, the nodes the raw bytes they
      // store: each node reads the whole cluster for the client's segments it was asked for.
      RemoteCache<Object, Object> octets = rcm.getCache(DIST_OCTETS);
      Map<Object, Object> expected = new java.util.HashMap<>();
      for (int i = 0; i < 3_000; i++) {
         expected.put(i % 3 == 0 ? (Object) i : "octets-" + i, i % 2 == 0 ? (Object) (long) i : "value-" + i);
      }
      octets.putAll(expected);
      Map<Object, Object> seen = new java.util.HashMap<>();
      List<Object> twice = new ArrayList<>();
      try (var entries = octets.retrieveEntries(null, 97)) {
         while (entries.hasNext()) {
            Map.Entry<Object, Object> entry = entries.next();
            if (seen.put(entry.getKey(), entry.getValue()) != null) {
               twice.add(entry.getKey());
            }
         }
      }
      assertTrue(twice.isEmpty(), twice.size() + " entries iterated twice, e.g. " + twice.stream().limit(5).toList());
      assertEquals(expected, seen, "every entry once, keys and values with their Java types");
      assertEquals(expected.keySet(), new HashSet<>(octets.keySet()));
      System.out.printf("cluster: iterated %d octet-stream entries, each once%n", seen.size());
   }

   @Test
   @Order(3)
   @Timeout(180)
   void noAcknowledgedWriteIsLostWhenANodeIsKilled() throws Exception {
      String[] pids = System.getenv("WEFT_PIDS").split(";");
      Map<String, String> acknowledged = new ConcurrentHashMap<>();
      Set<String> unknown = ConcurrentHashMap.newKeySet();
      AtomicBoolean stop = new AtomicBoolean();
      List<Thread> writers = new ArrayList<>();
      for (int w = 0; w < 2; w++) {
         int writer = w;
         Thread thread = new Thread(() -> {
            for (int i = 0; !stop.get(); i++) {
               String key = "kill-" + writer + "-" + i;
               String value = "v" + i;
               try {
                  cache.put(key, value);
                  acknowledged.put(key, value);
               } catch (RuntimeException failed) {
                  unknown.add(key);
               }
            }
         });
         thread.start();
         writers.add(thread);
      }
      Weft.sleep(2_000);
      // SIGKILL the last node: no goodbye, its connections just break.
      long victim = Long.parseLong(pids[pids.length - 1].trim());
      ProcessHandle.of(victim).ifPresent(ProcessHandle::destroyForcibly);
      Weft.sleep(10_000);
      stop.set(true);
      for (Thread thread : writers) {
         thread.join(60_000);
      }
      System.out.printf("cluster: %d writes acknowledged, %d unanswered across the kill%n",
            acknowledged.size(), unknown.size());
      assertTrue(acknowledged.size() > 100, "too few writes acknowledged: " + acknowledged.size());
      Set<String> lost = new HashSet<>();
      for (Map.Entry<String, String> write : acknowledged.entrySet()) {
         String read = cache.get(write.getKey());
         if (!write.getValue().equals(read)) {
            lost.add(write.getKey() + "=" + read);
         }
      }
      assertTrue(lost.isEmpty(), lost.size() + " acknowledged writes lost, e.g. " + lost.stream().limit(5).toList());
   }
}
