package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.infinispan.client.hotrod.configuration.NearCacheMode;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A second manager with an INVALIDATED near cache on `protostream`: it reads through
 * GET_WITH_METADATA and must see other clients' writes once the server's invalidation events arrive.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class NearCacheTest extends HotRodTestBase {
   private static final Duration INVALIDATION_WAIT = Duration.ofSeconds(5);
   private RemoteCacheManager nearManager;
   private RemoteCache<String, String> near;
   private RemoteCache<String, String> writer;

   @BeforeAll
   void openNearManager() {
      nearManager = Weft.manager(builder -> builder.remoteCache(Weft.PROTOSTREAM)
            .nearCacheMode(NearCacheMode.INVALIDATED)
            .nearCacheMaxEntries(100));
      near = nearManager.getCache(Weft.PROTOSTREAM);
      assertNotNull(near);
   }

   @AfterAll
   void closeNearManager() {
      if (nearManager != null) {
         nearManager.close();
      }
   }

   @BeforeEach
   void clear() {
      writer = cache(Weft.PROTOSTREAM);
      writer.clear();
      // clear() raises no per-key events, so drop what the near cache may hold from earlier tests.
      near.clear();
   }

   @Test
   void updateAndRemoveByAnotherClientInvalidate() {
      writer.put("k", "v1");
      assertEquals("v1", near.get("k"));
      assertEquals("v1", near.get("k"), "second read, now from the near cache");
      writer.put("k", "v2");
      Weft.awaitEquals("near read of k after an update", INVALIDATION_WAIT, "v2", () -> near.get("k"));
      writer.replace("k", "v3");
      Weft.awaitEquals("near read of k after a replace", INVALIDATION_WAIT, "v3", () -> near.get("k"));
      writer.remove("k");
      Weft.awaitEquals("near read of k after a remove", INVALIDATION_WAIT, null, () -> near.get("k"));
      writer.put("k", "v4");
      Weft.awaitEquals("near read of k after it is re-created", INVALIDATION_WAIT, "v4", () -> near.get("k"));
   }

   @Test
   void expiryIsSeenThroughTheNearCache() {
      writer.put("short", "v", 1, TimeUnit.SECONDS);
      assertEquals("v", near.get("short"));
      // The near cache keeps the entry until the server's expired event. A read by another client
      // meets the expired entry and drops it, which raises that event (the reaper would, later).
      Weft.await("short to expire on the server", Duration.ofSeconds(15), () -> writer.get("short") == null);
      Weft.awaitEquals("near read of an expired entry", INVALIDATION_WAIT, null, () -> near.get("short"));
   }

   @Test
   void nearClientsOwnWritesAreVisibleEverywhere() {
      near.put("own", "1");
      assertEquals("1", near.get("own"));
      assertEquals("1", writer.get("own"));
      near.put("own", "2");
      assertEquals("2", near.get("own"));
      assertEquals("2", writer.get("own"));
      near.remove("own");
      assertEquals(null, near.get("own"));
      assertEquals(null, writer.get("own"));
   }

   @Test
   void moreKeysThanTheNearCacheHolds() {
      for (int i = 0; i < 300; i++) {
         writer.put("many-" + i, "a" + i);
      }
      for (int i = 0; i < 300; i++) {
         assertEquals("a" + i, near.get("many-" + i));
      }
      for (int i = 0; i < 300; i++) {
         writer.put("many-" + i, "b" + i);
      }
      for (int i = 0; i < 300; i++) {
         String key = "many-" + i;
         String expected = "b" + i;
         Weft.awaitEquals("near read of " + key, INVALIDATION_WAIT, expected, () -> near.get(key));
      }
   }
}
