package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Handshake (PING at 3.1 then 4.x), cache lookup by PING, unknown caches, the default cache. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ConnectionTest extends HotRodTestBase {

   @Test
   void managerStartsAndFindsEveryConfiguredCache() {
      assertTrue(rcm.isStarted());
      for (String name : new String[] {Weft.PROTOSTREAM, Weft.TEXT, Weft.DEFAULT}) {
         RemoteCache<String, String> cache = cache(name);
         assertEquals(name, cache.getName());
         String key = Weft.unique("conn");
         cache.put(key, "here");
         assertEquals("here", cache.get(key), "round trip on " + name);
         cache.remove(key);
      }
   }

   @Test
   void unknownCacheIsNull() {
      // The server answers the cache PING with an error whose text contains CacheNotFoundException.
      assertNull(rcm.getCache("no-such-cache"));
      assertNull(rcm.getCache("no-such-cache"), "asking twice still answers null");
      // The connection stays usable after the error.
      RemoteCache<String, String> cache = cache(Weft.PROTOSTREAM);
      String key = Weft.unique("after-error");
      cache.put(key, "ok");
      assertEquals("ok", cache.get(key));
      cache.remove(key);
   }

   @Test
   void defaultCacheIsTheCacheNamedDefault() {
      RemoteCache<String, String> byDefault = rcm.getCache();
      assertNotNull(byDefault, "rcm.getCache() (empty cache name) returned null");
      String key = Weft.unique("default-cache");
      byDefault.put(key, "via empty name");
      assertEquals("via empty name", byDefault.get(key));
      RemoteCache<String, String> named = cache(Weft.DEFAULT);
      assertEquals("via empty name", named.get(key), "the empty name addresses the cache named default");
      named.remove(key);
      assertNull(byDefault.get(key));
   }

   @Test
   void cacheNamesListsConfiguredCaches() {
      Set<String> names = rcm.getCacheNames();
      assertTrue(names.containsAll(Set.of(Weft.PROTOSTREAM, Weft.TEXT, Weft.DEFAULT)), "cache names: " + names);
   }

   @Test
   void manyManagersOpenAndCloseInTurn() {
      String key = Weft.unique("managers");
      for (int i = 0; i < 5; i++) {
         try (RemoteCacheManager other = Weft.manager()) {
            RemoteCache<String, Integer> cache = other.getCache(Weft.PROTOSTREAM);
            assertNotNull(cache);
            Integer previous = cache.get(key);
            assertEquals(i == 0 ? null : i - 1, previous, "value written by the previous manager");
            cache.put(key, i);
         }
      }
      RemoteCache<String, Integer> cache = cache(Weft.PROTOSTREAM);
      assertEquals(4, cache.get(key));
      cache.remove(key);
   }
}
