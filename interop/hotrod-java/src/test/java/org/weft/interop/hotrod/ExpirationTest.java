package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.infinispan.client.hotrod.MetadataValue;
import org.infinispan.client.hotrod.RemoteCache;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/** Lifespan and max idle in every TimeUnit the client encodes, as seen by reads and metadata. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ExpirationTest extends HotRodTestBase {
   private static final Duration GONE_WITHIN = Duration.ofSeconds(15);
   private RemoteCache<String, String> cache;

   @BeforeEach
   void clear() {
      cache = cache(Weft.PROTOSTREAM);
      cache.clear();
   }

   /** Waits until get(key) is null and checks it did not vanish before minimumMillis after start. */
   private void assertExpiresAfter(String key, long startNanos, long minimumMillis) {
      Weft.await(key + " to expire", GONE_WITHIN, () -> cache.get(key) == null);
      long elapsed = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
      assertTrue(elapsed >= minimumMillis - 50, key + " expired after " + elapsed + " ms, before its " + minimumMillis + " ms");
   }

   @Test
   void lifespanInSeconds() {
      long start = System.nanoTime();
      cache.put("k", "v", 2, TimeUnit.SECONDS);
      assertEquals("v", cache.get("k"), "present right after the put");
      assertExpiresAfter("k", start, 2000);
      assertEquals(0, cache.size(), "an expired entry is not counted");
   }

   @Test
   void lifespanInMilliseconds() {
      long start = System.nanoTime();
      cache.put("k", "v", 1500, TimeUnit.MILLISECONDS);
      assertEquals("v", cache.get("k"));
      assertExpiresAfter("k", start, 1500);
      assertTrue(!cache.containsKey("k"));
   }

   @Test
   void maxIdleKeepsTouchedEntryAliveThenExpires() {
      cache.put("k", "v", -1, TimeUnit.SECONDS, 1, TimeUnit.SECONDS);
      // Read it every 250 ms for 3 s, three times its max idle: each read resets the idle clock.
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
      while (System.nanoTime() < until) {
         assertEquals("v", cache.get("k"), "a touched entry must not idle out");
         Weft.sleep(250);
      }
      // Left alone, it idles out. Each probe is a read, so wait longer than max idle between probes.
      boolean gone = false;
      for (int attempt = 0; attempt < 5 && !gone; attempt++) {
         Weft.sleep(1600);
         gone = cache.get("k") == null;
      }
      assertTrue(gone, "entry with 1 s max idle still present after 1.6 s without reads");
   }

   @Test
   void lifespanWinsOverTouchesWhenBothAreSet() {
      long start = System.nanoTime();
      cache.put("k", "v", 2, TimeUnit.SECONDS, 10, TimeUnit.SECONDS);
      MetadataValue<String> metadata = cache.getWithMetadata("k");
      assertEquals(2, metadata.getLifespan());
      assertEquals(10, metadata.getMaxIdle());
      // Reads keep it from idling but not from living past its lifespan.
      Weft.await("k to expire despite reads", GONE_WITHIN, () -> cache.get("k") == null);
      assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 1950);
   }

   @Test
   void metadataReportsExpirationInSeconds() {
      long before = System.currentTimeMillis();
      cache.put("k", "v", 90, TimeUnit.SECONDS, 45, TimeUnit.SECONDS);
      long after = System.currentTimeMillis();
      MetadataValue<String> metadata = cache.getWithMetadata("k");
      assertNotNull(metadata);
      assertEquals("v", metadata.getValue());
      assertEquals(90, metadata.getLifespan());
      assertEquals(45, metadata.getMaxIdle());
      assertTrue(metadata.getCreated() >= before - 1000 && metadata.getCreated() <= after + 1000,
            "created " + metadata.getCreated() + " not within [" + before + ", " + after + "]");
      assertTrue(metadata.getLastUsed() >= before - 1000 && metadata.getLastUsed() <= System.currentTimeMillis() + 1000,
            "lastUsed " + metadata.getLastUsed());

      cache.put("lifespan-only", "v", 3, TimeUnit.MINUTES);
      MetadataValue<String> lifespanOnly = cache.getWithMetadata("lifespan-only");
      assertEquals(180, lifespanOnly.getLifespan());
      assertEquals(-1, lifespanOnly.getMaxIdle());
      assertTrue(lifespanOnly.getCreated() > 0);

      cache.put("millis", "v", 7500, TimeUnit.MILLISECONDS);
      assertEquals(7, cache.getWithMetadata("millis").getLifespan(), "7500 ms is reported in whole seconds");
   }

   @Test
   void overwriteWithoutLifespanMakesEntryImmortal() {
      cache.put("k", "mortal", 1, TimeUnit.SECONDS);
      cache.put("k", "immortal");
      assertEquals(-1, cache.getWithMetadata("k").getLifespan());
      Weft.sleep(1800);
      assertEquals("immortal", cache.get("k"));
   }

   @Test
   void replaceCanAddALifespan() {
      cache.put("k", "v");
      cache.replace("k", "v2", 1, TimeUnit.SECONDS);
      assertEquals(1, cache.getWithMetadata("k").getLifespan());
      Weft.await("replaced entry to expire", GONE_WITHIN, () -> cache.get("k") == null);
   }

   @Test
   void putIfAbsentWithLifespan() {
      long start = System.nanoTime();
      cache.putIfAbsent("k", "v", 1, TimeUnit.SECONDS);
      assertEquals("v", cache.get("k"));
      assertExpiresAfter("k", start, 1000);
      cache.putIfAbsent("k", "again");
      assertEquals("again", cache.get("k"), "after expiry the key is absent again");
   }

   @Test
   void putAllWithLifespan() {
      Map<String, String> entries = new HashMap<>();
      for (int i = 0; i < 50; i++) {
         entries.put("pa-" + i, "v" + i);
      }
      long start = System.nanoTime();
      cache.putAll(entries, 2, TimeUnit.SECONDS);
      assertEquals(entries, cache.getAll(entries.keySet()));
      assertEquals(2, cache.getWithMetadata("pa-7").getLifespan());
      Weft.await("all 50 entries to expire", GONE_WITHIN, () -> cache.getAll(entries.keySet()).isEmpty());
      assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 1950);
      assertEquals(0, cache.size());
   }

   @Test
   void nanosecondLifespanExpires() {
      long start = System.nanoTime();
      cache.put("k", "v", 1_200_000_000L, TimeUnit.NANOSECONDS);
      assertEquals("v", cache.get("k"));
      assertExpiresAfter("k", start, 1200);
   }

   static Stream<Arguments> units() {
      return Stream.of(
            Arguments.of(10L, TimeUnit.MINUTES, 600),
            Arguments.of(2L, TimeUnit.HOURS, 7200),
            Arguments.of(1L, TimeUnit.DAYS, 86400),
            Arguments.of(30_000_000L, TimeUnit.MICROSECONDS, 30),
            Arguments.of(45_000_000_000L, TimeUnit.NANOSECONDS, 45),
            Arguments.of(20L, TimeUnit.SECONDS, 20),
            Arguments.of(25_000L, TimeUnit.MILLISECONDS, 25));
   }

   @ParameterizedTest(name = "{0} {1}")
   @MethodSource("units")
   void everyTimeUnitIsAccepted(long amount, TimeUnit unit, int seconds) {
      cache.put("lifespan", "v", amount, unit);
      cache.put("maxidle", "v", -1, TimeUnit.SECONDS, amount, unit);
      assertEquals("v", cache.get("lifespan"));
      assertEquals("v", cache.get("maxidle"));
      assertEquals(seconds, cache.getWithMetadata("lifespan").getLifespan());
      assertEquals(seconds, cache.getWithMetadata("maxidle").getMaxIdle());
      assertNull(cache.get("neither"));
   }
}
