package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.infinispan.client.hotrod.configuration.ConfigurationBuilder;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * The official client's view of a rolling restart (interop/rolling_restart.py restarts the
 * nodes one by one with SIGTERM while this runs): 16 threads, 80 % reads and 20 % writes
 * over 10,000 keys, with the client's default retries and every node in its server list.
 * Not one operation may fail at the application, and every read must see the last write
 * acknowledged for its key (each thread writes keys of its own, so the last acknowledged
 * value is known). It runs until the orchestrator creates {@code stop} in the directory
 * WEFT_ROLLING_CONTROL names, after writing {@code started} there once warm.
 */
@EnabledIfEnvironmentVariable(named = "WEFT_ROLLING_CONTROL", matches = ".+")
class RollingRestartTest {
   static final String CACHE = "dist";
   static final int THREADS = 16;
   static final int KEYS_PER_THREAD = 10_000 / THREADS;

   @Test
   @Timeout(3_600)
   void aRollingRestartFailsNoOperationAndLosesNoWrite() throws Exception {
      Path control = Path.of(System.getenv("WEFT_ROLLING_CONTROL"));
      ConfigurationBuilder builder = new ConfigurationBuilder();
      // Every node in the server list, the client's default retries and timeouts.
      builder.addServers(System.getenv("WEFT_SERVERS"));
      try (RemoteCacheManager rcm = new RemoteCacheManager(builder.build())) {
         RemoteCache<String, String> cache = rcm.getCache(CACHE);
         List<Map<String, String>> written = new ArrayList<>();
         for (int t = 0; t < THREADS; t++) {
            Map<String, String> mine = new HashMap<>();
            for (int k = 0; k < KEYS_PER_THREAD; k++) {
               String key = "rolling-" + t + "-" + k;
               String value = "0";
               cache.put(key, value);
               mine.put(key, value);
            }
            written.add(mine);
         }
         AtomicLong operations = new AtomicLong();
         ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
         ConcurrentLinkedQueue<String> stale = new ConcurrentLinkedQueue<>();
         Path stop = control.resolve("stop");
         List<Thread> threads = new ArrayList<>();
         for (int t = 0; t < THREADS; t++) {
            Map<String, String> mine = written.get(t);
            int thread = t;
            Thread worker = new Thread(() -> {
               ThreadLocalRandom random = ThreadLocalRandom.current();
               // A write that failed may have run: its key then reads either value until
               // the next acknowledged write (the failure is counted all the same).
               Map<String, String> maybe = new HashMap<>();
               long seq = 0;
               while (!Files.exists(stop)) {
                  String key = "rolling-" + thread + "-" + random.nextInt(KEYS_PER_THREAD);
                  try {
                     if (random.nextInt(5) == 0) {
                        String value = Long.toString(++seq);
                        maybe.put(key, value);
                        cache.put(key, value);
                        mine.put(key, value);
                        maybe.remove(key);
                     } else {
                        String read = cache.get(key);
                        if (!mine.get(key).equals(read) && !java.util.Objects.equals(maybe.get(key), read)) {
                           stale.add(key + ": read " + read + ", last acknowledged " + mine.get(key));
                        }
                     }
                     operations.incrementAndGet();
                  } catch (RuntimeException failed) {
                     failures.add(key + ": " + failed);
                  }
               }
            }, "rolling-" + t);
            worker.start();
            threads.add(worker);
         }
         Files.writeString(control.resolve("started"), "");
         for (Thread worker : threads) {
            worker.join();
         }
         List<String> lost = new ArrayList<>();
         for (Map<String, String> mine : written) {
            for (Map.Entry<String, String> write : mine.entrySet()) {
               String read = cache.get(write.getKey());
               if (!write.getValue().equals(read)) {
                  lost.add(write.getKey() + ": read " + read + ", last acknowledged " + write.getValue());
               }
            }
         }
         String summary = String.format(
               "rolling restart, Hot Rod Java client %s: %d operations, %d failed, %d stale reads, %d of %d keys lost%n",
               System.getProperty("infinispan.client.version"), operations.get(), failures.size(), stale.size(),
               lost.size(), THREADS * KEYS_PER_THREAD);
         System.out.print(summary);
         Files.writeString(control.resolve("java-summary"), summary);
         assertTrue(operations.get() > 1_000, "too few operations: " + operations.get());
         assertTrue(failures.isEmpty(), failures.size() + " operations failed, e.g. " + failures.stream().limit(5).toList());
         assertTrue(stale.isEmpty(), stale.size() + " stale reads, e.g. " + stale.stream().limit(5).toList());
         assertTrue(lost.isEmpty(), lost.size() + " acknowledged writes lost, e.g. " + lost.stream().limit(5).toList());
      }
   }
}
