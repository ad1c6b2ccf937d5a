package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.Flag;
import org.infinispan.client.hotrod.MetadataValue;
import org.infinispan.client.hotrod.RemoteCache;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The single-key API on cache `protostream`, with and without FORCE_RETURN_VALUE. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BasicOperationsTest extends HotRodTestBase {
   private RemoteCache<String, String> cache;

   /**
    * FORCE_RETURN_VALUE for the next call. withFlags must be called per operation: the 15.0 client
    * keeps flags in a thread-local consumed by the next call and returns the same cache.
    */
   private RemoteCache<String, String> forceReturn() {
      return cache.withFlags(Flag.FORCE_RETURN_VALUE);
   }

   @BeforeEach
   void clear() {
      cache = cache(Weft.PROTOSTREAM);
      cache.clear();
      assertEquals(0, cache.size());
   }

   @Test
   void putThenGet() {
      assertNull(cache.put("k1", "v1"), "put without FORCE_RETURN_VALUE returns null");
      assertEquals("v1", cache.get("k1"));
      assertNull(cache.get("absent"));
   }

   @Test
   void putOverwrites() {
      cache.put("k", "one");
      assertNull(cache.put("k", "two"), "put without FORCE_RETURN_VALUE returns null even over a value");
      assertEquals("two", cache.get("k"));
      assertEquals(1, cache.size());
   }

   @Test
   void removeDeletes() {
      cache.put("k", "v");
      assertNull(cache.remove("k"), "remove without FORCE_RETURN_VALUE returns null");
      assertNull(cache.get("k"));
      assertFalse(cache.containsKey("k"));
      assertNull(cache.remove("k"), "removing an absent key");
      assertEquals(0, cache.size());
   }

   @Test
   void containsKey() {
      assertFalse(cache.containsKey("k"));
      cache.put("k", "v");
      assertTrue(cache.containsKey("k"));
      assertFalse(cache.containsKey("K"), "keys are case-sensitive");
   }

   @Test
   void putIfAbsent() {
      assertNull(cache.putIfAbsent("k", "first"));
      assertEquals("first", cache.get("k"));
      assertNull(cache.putIfAbsent("k", "second"), "without FORCE_RETURN_VALUE nothing is returned");
      assertEquals("first", cache.get("k"), "putIfAbsent must not overwrite");
   }

   @Test
   void replaceOnlyReplacesPresentKeys() {
      assertNull(cache.replace("k", "v"));
      assertFalse(cache.containsKey("k"), "replace must not insert");
      cache.put("k", "old");
      cache.replace("k", "new");
      assertEquals("new", cache.get("k"));
   }

   @Test
   void replaceWithExpectedOldValue() {
      assertFalse(cache.replace("k", "old", "new"), "absent key");
      assertFalse(cache.containsKey("k"));
      cache.put("k", "old");
      assertFalse(cache.replace("k", "other", "new"), "wrong old value");
      assertEquals("old", cache.get("k"));
      assertTrue(cache.replace("k", "old", "new"));
      assertEquals("new", cache.get("k"));
   }

   @Test
   void removeWithExpectedValue() {
      cache.put("k", "v");
      assertFalse(cache.remove("k", "other"));
      assertEquals("v", cache.get("k"));
      assertTrue(cache.remove("k", "v"));
      assertNull(cache.get("k"));
      assertFalse(cache.remove("k", "v"), "already gone");
   }

   @Test
   void getWithMetadataOfImmortalEntry() {
      assertNull(cache.getWithMetadata("k"), "absent key has no metadata");
      cache.put("k", "v");
      MetadataValue<String> metadata = cache.getWithMetadata("k");
      assertNotNull(metadata);
      assertEquals("v", metadata.getValue());
      assertEquals(-1, metadata.getLifespan(), "no lifespan");
      assertEquals(-1, metadata.getMaxIdle(), "no max idle");
      assertEquals(-1, metadata.getCreated(), "created is only sent for mortal entries");
      assertEquals(-1, metadata.getLastUsed(), "last used is only sent for entries with max idle");
   }

   @Test
   void versionsAreUniquePerWrite() {
      Set<Long> versions = new HashSet<>();
      for (int i = 0; i < 20; i++) {
         cache.put("k", "v" + i);
         MetadataValue<String> metadata = cache.getWithMetadata("k");
         assertEquals("v" + i, metadata.getValue());
         assertTrue(versions.add(metadata.getVersion()), "version reused: " + metadata.getVersion());
         cache.put("other" + i, "x");
         assertTrue(versions.add(cache.getWithMetadata("other" + i).getVersion()), "version shared across keys");
      }
      long version = cache.getWithMetadata("k").getVersion();
      assertEquals(version, cache.getWithMetadata("k").getVersion(), "reads do not change the version");
   }

   @Test
   void replaceWithVersion() {
      assertFalse(cache.replaceWithVersion("k", "v", 1), "absent key");
      assertFalse(cache.containsKey("k"));
      cache.put("k", "v1");
      long v1 = cache.getWithMetadata("k").getVersion();
      assertTrue(cache.replaceWithVersion("k", "v2", v1));
      MetadataValue<String> after = cache.getWithMetadata("k");
      assertEquals("v2", after.getValue());
      assertNotEquals(v1, after.getVersion(), "a replace makes a new version");
      assertFalse(cache.replaceWithVersion("k", "v3", v1), "stale version");
      assertEquals("v2", cache.get("k"));
      assertTrue(cache.replaceWithVersion("k", "v3", after.getVersion()));
      assertEquals("v3", cache.get("k"));
   }

   @Test
   void removeWithVersion() {
      assertFalse(cache.removeWithVersion("k", 1), "absent key");
      cache.put("k", "v1");
      long stale = cache.getWithMetadata("k").getVersion();
      cache.put("k", "v2");
      assertFalse(cache.removeWithVersion("k", stale), "stale version");
      assertEquals("v2", cache.get("k"));
      long current = cache.getWithMetadata("k").getVersion();
      assertTrue(cache.removeWithVersion("k", current));
      assertNull(cache.get("k"));
      assertFalse(cache.removeWithVersion("k", current), "already removed");
   }

   @Test
   void sizeIsEmptyClearAndKeySetSize() {
      assertTrue(cache.isEmpty());
      for (int i = 0; i < 25; i++) {
         cache.put("k" + i, "v" + i);
      }
      assertEquals(25, cache.size());
      assertFalse(cache.isEmpty());
      assertEquals(25, cache.keySet().size());
      cache.remove("k0");
      assertEquals(24, cache.size());
      cache.clear();
      assertEquals(0, cache.size());
      assertTrue(cache.isEmpty());
      assertEquals(0, cache.keySet().size());
      assertNull(cache.get("k1"));
   }

   @Test
   void smallPutAllAndGetAll() {
      Map<String, String> entries = new HashMap<>();
      for (int i = 0; i < 10; i++) {
         entries.put("pa" + i, "value" + i);
      }
      cache.putAll(entries);
      assertEquals(entries, cache.getAll(entries.keySet()));
      assertEquals(Map.of(), cache.getAll(Set.of("missing-1", "missing-2")));
      assertEquals(10, cache.size());
   }

   @Test
   void forceReturnValueOnPut() {
      assertNull(forceReturn().put("k", "v1"), "nothing to return for a new key");
      assertEquals("v1", forceReturn().put("k", "v2"));
      assertEquals("v2", cache.get("k"));
   }

   @Test
   void forceReturnValueOnRemove() {
      assertNull(forceReturn().remove("k"), "absent key");
      cache.put("k", "v");
      assertEquals("v", forceReturn().remove("k"));
      assertFalse(cache.containsKey("k"));
   }

   @Test
   void forceReturnValueOnReplace() {
      assertNull(forceReturn().replace("k", "v"), "absent key");
      assertFalse(cache.containsKey("k"), "replace must not insert");
      cache.put("k", "old");
      assertEquals("old", forceReturn().replace("k", "new"));
      assertEquals("new", cache.get("k"));
   }

   @Test
   void forceReturnValueOnPutIfAbsent() {
      assertNull(forceReturn().putIfAbsent("k", "first"), "inserted: nothing was there");
      assertEquals("first", forceReturn().putIfAbsent("k", "second"), "not inserted: the current value comes back");
      assertEquals("first", cache.get("k"));
   }

   @Test
   void withoutFlagConditionalWritesReturnNull() {
      cache.put("k", "v");
      assertNull(cache.putIfAbsent("k", "x"));
      assertNull(cache.replace("k", "w"));
      assertEquals("w", cache.get("k"));
      assertNull(cache.put("k", "z"));
      assertNull(cache.remove("k"));
      assertFalse(cache.containsKey("k"));
   }

   @Test
   void computeFamilyBuiltOnVersions() {
      // The client implements these with getWithMetadata + versioned writes (merge is unsupported client-side).
      assertEquals("a", cache.computeIfAbsent("k", key -> "a"));
      assertEquals("a", cache.computeIfAbsent("k", key -> "b"), "present: the mapping function is not applied");
      assertEquals("a!", cache.compute("k", (key, old) -> old + "!"));
      assertEquals("a!?", cache.computeIfPresent("k", (key, old) -> old + "?"));
      assertEquals("a!?", cache.get("k"));
      assertNull(cache.computeIfPresent("k", (key, old) -> null), "returning null removes");
      assertFalse(cache.containsKey("k"));
   }
}
