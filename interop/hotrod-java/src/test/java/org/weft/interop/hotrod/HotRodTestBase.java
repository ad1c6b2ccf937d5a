package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertNotNull;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/** One RemoteCacheManager per test class, opened with the client's default configuration. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class HotRodTestBase {
   protected RemoteCacheManager rcm;

   @BeforeAll
   void openManager() {
      rcm = Weft.manager();
   }

   @AfterAll
   void closeManager() {
      if (rcm != null) {
         rcm.close();
      }
   }

   /** A cache the server must have; fails if getCache answers null. */
   protected <K, V> RemoteCache<K, V> cache(String name) {
      RemoteCache<K, V> cache = rcm.getCache(name);
      assertNotNull(cache, "getCache(\"" + name + "\") returned null: the server does not know the cache");
      return cache;
   }
}
