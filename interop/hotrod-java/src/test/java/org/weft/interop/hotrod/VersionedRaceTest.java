package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.MetadataValue;
import org.infinispan.client.hotrod.RemoteCache;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Optimistic concurrency through entry versions: exactly one writer per version wins. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class VersionedRaceTest extends HotRodTestBase {
   private final ExecutorService pool = Executors.newFixedThreadPool(8);
   private RemoteCache<String, Object> cache;

   @BeforeEach
   void clear() {
      cache = cache(Weft.PROTOSTREAM);
      cache.clear();
   }

   @AfterAll
   void stopPool() {
      pool.shutdownNow();
   }

   /** Runs the tasks at once (behind a barrier) and returns their results in order. */
   private <T> List<T> race(List<Callable<T>> tasks) throws Exception {
      CyclicBarrier barrier = new CyclicBarrier(tasks.size());
      List<Future<T>> futures = new ArrayList<>();
      for (Callable<T> task : tasks) {
         futures.add(pool.submit(() -> {
            barrier.await(30, TimeUnit.SECONDS);
            return task.call();
         }));
      }
      List<T> results = new ArrayList<>();
      for (Future<T> future : futures) {
         results.add(future.get(60, TimeUnit.SECONDS));
      }
      return results;
   }

   @Test
   void twoReplacesWithTheSameVersionExactlyOneWins() throws Exception {
      for (int round = 0; round < 50; round++) {
         String key = "race-" + round;
         cache.put(key, "initial");
         long version = cache.getWithMetadata(key).getVersion();
         List<Boolean> won = race(List.of(
               () -> cache.replaceWithVersion(key, "A", version),
               () -> cache.replaceWithVersion(key, "B", version)));
         assertTrue(won.get(0) ^ won.get(1), "round " + round + ": exactly one must win, got " + won);
         assertEquals(won.get(0) ? "A" : "B", cache.get(key), "round " + round + ": the winner's value stays");
      }
   }

   @Test
   void concurrentVersionedIncrementsLoseNothing() throws Exception {
      int threads = 8;
      int perThread = 50;
      cache.put("counter", 0);
      List<Callable<Integer>> tasks = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
         tasks.add(() -> {
            int retries = 0;
            for (int i = 0; i < perThread; i++) {
               while (true) {
                  MetadataValue<Object> current = cache.getWithMetadata("counter");
                  int next = (Integer) current.getValue() + 1;
                  if (cache.replaceWithVersion("counter", next, current.getVersion())) {
                     break;
                  }
                  retries++;
               }
            }
            return retries;
         });
      }
      List<Integer> retries = race(tasks);
      assertEquals(threads * perThread, cache.get("counter"), "retries per thread: " + retries);
   }

   @Test
   void staleVersionsAreRefused() {
      cache.put("k", "v1");
      long v1 = cache.getWithMetadata("k").getVersion();
      cache.put("k", "v2");
      assertFalse(cache.removeWithVersion("k", v1), "remove with a stale version");
      assertFalse(cache.replaceWithVersion("k", "v3", v1), "replace with a stale version");
      assertEquals("v2", cache.get("k"));
      cache.remove("k");
      cache.put("k", "v4");
      assertFalse(cache.removeWithVersion("k", v1), "a re-created key does not reuse an old version");
      assertEquals("v4", cache.get("k"));
   }

   @Test
   void replaceAndRemoveWithTheSameVersionExactlyOneWins() throws Exception {
      for (int round = 0; round < 50; round++) {
         String key = "rr-" + round;
         cache.put(key, "initial");
         long version = cache.getWithMetadata(key).getVersion();
         List<Boolean> won = race(List.<Callable<Boolean>>of(
               () -> cache.replaceWithVersion(key, "replaced", version),
               () -> cache.removeWithVersion(key, version)));
         assertTrue(won.get(0) ^ won.get(1), "round " + round + ": exactly one must win, got " + won);
         assertEquals(won.get(0) ? "replaced" : null, cache.get(key), "round " + round);
      }
   }

   @Test
   void manyRemovesWithTheSameVersionExactlyOneWins() throws Exception {
      for (int round = 0; round < 20; round++) {
         String key = "rm-" + round;
         cache.put(key, "v");
         long version = cache.getWithMetadata(key).getVersion();
         List<Callable<Boolean>> tasks = new ArrayList<>();
         for (int t = 0; t < 6; t++) {
            tasks.add(() -> cache.removeWithVersion(key, version));
         }
         long winners = race(tasks).stream().filter(Boolean::booleanValue).count();
         assertEquals(1, winners, "round " + round);
         assertFalse(cache.containsKey(key));
      }
   }
}
