package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.DefaultTemplate;
import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.infinispan.client.hotrod.exceptions.HotRodClientException;
import org.infinispan.commons.configuration.StringConfiguration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * rcm.administration(): EXEC of @@cache@create, @@cache@getorcreate and @@cache@remove, with JSON
 * and XML configurations and template names. Cache names are unique per run; every test removes
 * what it created.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AdminTest extends HotRodTestBase {
   private static final String PROTOSTREAM_JSON =
         "{\"local-cache\":{\"encoding\":{\"media-type\":\"application/x-protostream\"}}}";
   private static final String PROTOSTREAM_XML =
         "<local-cache><encoding media-type=\"application/x-protostream\"/></local-cache>";
   private final List<String> created = new ArrayList<>();

   private String name(String what) {
      String name = Weft.unique("admin-" + what);
      created.add(name);
      return name;
   }

   @AfterEach
   void removeCreated() {
      for (String name : created) {
         try {
            rcm.administration().removeCache(name);
         } catch (HotRodClientException ignored) {
            // Already removed by the test, or never created.
         }
      }
      created.clear();
   }

   private static void assertUsable(RemoteCache<String, String> cache) {
      assertNotNull(cache);
      cache.put("k", "v");
      assertEquals("v", cache.get("k"));
      assertEquals(1, cache.size());
      assertEquals("v", cache.getWithMetadata("k").getValue());
   }

   @Test
   void createFromJsonConfiguration() {
      String name = name("json");
      RemoteCache<String, String> cache = rcm.administration().createCache(name, new StringConfiguration(PROTOSTREAM_JSON));
      assertUsable(cache);
      assertEquals(name, cache.getName());
      assertTrue(rcm.getCacheNames().contains(name), "new cache listed in " + rcm.getCacheNames());
   }

   @Test
   void createFromXmlConfiguration() {
      String name = name("xml");
      RemoteCache<String, String> cache = rcm.administration().createCache(name, new StringConfiguration(PROTOSTREAM_XML));
      assertUsable(cache);
   }

   @Test
   void createFromTemplateName() {
      String name = name("template");
      RemoteCache<String, String> cache = rcm.administration().createCache(name, "org.infinispan.LOCAL");
      assertUsable(cache);
   }

   @Test
   @SuppressWarnings("removal")
   void createFromDefaultTemplateConstant() {
      // 15.0 sends the template name org.infinispan.LOCAL; 15.2 sends its JSON ({"local-cache": {"statistics": "true"}}).
      String name = name("default-template");
      RemoteCache<String, String> cache = rcm.administration().createCache(name, DefaultTemplate.LOCAL);
      assertUsable(cache);
   }

   @Test
   void getOrCreateTwiceIsANoOpTheSecondTime() {
      String name = name("get-or-create");
      RemoteCache<String, String> first = rcm.administration().getOrCreateCache(name, new StringConfiguration(PROTOSTREAM_JSON));
      assertUsable(first);
      RemoteCache<String, String> second = rcm.administration().getOrCreateCache(name, new StringConfiguration(PROTOSTREAM_JSON));
      assertNotNull(second);
      assertEquals("v", second.get("k"), "the second getOrCreateCache must not recreate (and empty) the cache");
      assertEquals(1, second.size());
   }

   @Test
   void getOrCreateFromTemplateName() {
      String name = name("get-or-create-template");
      assertUsable(rcm.administration().getOrCreateCache(name, "org.infinispan.LOCAL"));
      RemoteCache<String, String> again = rcm.administration().getOrCreateCache(name, "org.infinispan.LOCAL");
      assertEquals("v", again.get("k"));
   }

   @Test
   void getOrCreateOfAConfiguredCacheKeepsItsData() {
      RemoteCache<String, String> protostream = cache(Weft.PROTOSTREAM);
      String key = Weft.unique("survives");
      protostream.put(key, "still here");
      RemoteCache<String, String> same = rcm.administration().getOrCreateCache(Weft.PROTOSTREAM, new StringConfiguration(PROTOSTREAM_JSON));
      assertEquals("still here", same.get(key));
      protostream.remove(key);
   }

   @Test
   void removeCacheMakesItUnknown() {
      String name = name("remove");
      assertUsable(rcm.administration().createCache(name, new StringConfiguration(PROTOSTREAM_JSON)));
      rcm.administration().removeCache(name);
      assertNull(rcm.getCache(name), "getCache after removeCache");
      try (RemoteCacheManager other = Weft.manager()) {
         assertNull(other.getCache(name), "a fresh manager does not find it either");
      }
      assertTrue(!rcm.getCacheNames().contains(name), "removed cache still listed");
      // The name can be used again, and the new cache starts empty.
      RemoteCache<String, String> again = rcm.administration().createCache(name, new StringConfiguration(PROTOSTREAM_JSON));
      assertNull(again.get("k"), "a re-created cache starts empty");
   }

   @Test
   void creatingAnExistingCacheFails() {
      String name = name("exists");
      assertUsable(rcm.administration().createCache(name, new StringConfiguration(PROTOSTREAM_JSON)));
      assertThrows(HotRodClientException.class,
            () -> rcm.administration().createCache(name, new StringConfiguration(PROTOSTREAM_JSON)));
      assertThrows(HotRodClientException.class,
            () -> rcm.administration().createCache(Weft.PROTOSTREAM, "org.infinispan.LOCAL"),
            "creating a cache declared in the server configuration");
      assertEquals("v", rcm.<String, String>getCache(name).get("k"), "the failed create left the cache alone");
   }

   @Test
   void invalidConfigurationFails() {
      String name = name("invalid");
      assertThrows(HotRodClientException.class,
            () -> rcm.administration().createCache(name, new StringConfiguration("{\"local-cache\":{\"no-such-attribute\":1}}")));
      assertNull(rcm.getCache(name), "nothing created");
   }
}
