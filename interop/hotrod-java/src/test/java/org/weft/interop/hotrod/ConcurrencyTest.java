package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.Flag;
import org.infinispan.client.hotrod.RemoteCache;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Many threads sharing one RemoteCache (and so the client's connections) on cache `protostream`. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ConcurrencyTest extends HotRodTestBase {
   private static final int THREADS = 16;
   private final ExecutorService pool = Executors.newFixedThreadPool(THREADS);
   private RemoteCache<String, String> cache;

   @BeforeEach
   void clear() {
      cache = cache(Weft.PROTOSTREAM);
      cache.clear();
   }

   @AfterAll
   void stopPool() {
      pool.shutdownNow();
   }

   private static void check(boolean ok, long seed, int thread, int op, String what) {
      if (!ok) {
         throw new AssertionError("thread " + thread + " (seed " + seed + "), op " + op + ": " + what);
      }
   }

   @Test
   void sixteenThreadsOnDisjointKeysEachSeeTheirOwnWrites() throws Exception {
      long seed = Long.getLong("weft.seed", 16_16_16L);
      int opsPerThread = 1500;
      CountDownLatch start = new CountDownLatch(1);
      List<Future<Map<String, String>>> futures = new ArrayList<>();
      for (int t = 0; t < THREADS; t++) {
         int thread = t;
         futures.add(pool.submit(() -> {
            Random random = new Random(seed + thread);
            Map<String, String> model = new HashMap<>();
            start.await();
            for (int op = 0; op < opsPerThread; op++) {
               String key = "t" + thread + "-k" + random.nextInt(40);
               int choice = random.nextInt(10);
               if (choice < 4) {
                  String value = "t" + thread + "-v" + op;
                  String previous = cache.withFlags(Flag.FORCE_RETURN_VALUE).put(key, value);
                  check(Objects.equals(model.put(key, value), previous), seed, thread, op, "put " + key + " returned " + previous);
               } else if (choice < 8) {
                  String value = cache.get(key);
                  check(Objects.equals(model.get(key), value), seed, thread, op, "get " + key + " returned " + value + ", expected " + model.get(key));
               } else {
                  String previous = cache.withFlags(Flag.FORCE_RETURN_VALUE).remove(key);
                  check(Objects.equals(model.remove(key), previous), seed, thread, op, "remove " + key + " returned " + previous);
               }
            }
            return model;
         }));
      }
      start.countDown();
      Map<String, String> everything = new HashMap<>();
      for (Future<Map<String, String>> future : futures) {
         everything.putAll(future.get(100, TimeUnit.SECONDS));
      }
      assertEquals(everything.size(), cache.size());
      assertEquals(everything, cache.getAll(everything.keySet()));
   }

   @Test
   void sixteenThreadsRacingPutIfAbsentHaveOneWinner() throws Exception {
      for (int round = 0; round < 20; round++) {
         String key = "contested-" + round;
         CountDownLatch start = new CountDownLatch(1);
         List<Future<String>> futures = new ArrayList<>();
         for (int t = 0; t < THREADS; t++) {
            String mine = "thread-" + t;
            futures.add(pool.submit(() -> {
               start.await();
               String current = cache.withFlags(Flag.FORCE_RETURN_VALUE).putIfAbsent(key, mine);
               return current == null ? mine : "lost to " + current;
            }));
         }
         start.countDown();
         List<String> winners = new ArrayList<>();
         List<String> losers = new ArrayList<>();
         for (Future<String> future : futures) {
            String result = future.get(60, TimeUnit.SECONDS);
            (result.startsWith("lost to ") ? losers : winners).add(result);
         }
         assertEquals(1, winners.size(), "round " + round + " winners: " + winners);
         String winner = winners.get(0);
         assertEquals(winner, cache.get(key));
         for (String loser : losers) {
            assertEquals("lost to " + winner, loser, "round " + round + ": losers see the winner's value");
         }
      }
   }
}
