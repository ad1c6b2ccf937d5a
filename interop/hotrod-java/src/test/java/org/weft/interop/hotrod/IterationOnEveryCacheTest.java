package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.commons.util.CloseableIterator;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Iteration (retrieveEntries, keySet, entrySet, values, segment-filtered retrieveEntries) over
 * 20,000 entries on every storage media type: `protostream`, `default` (octet-stream, where the
 * client hashes the ProtoStream bytes it receives while the server stores raw bytes) and `text`.
 * The client checks every entry against the segments the server reports finished, so a server
 * that reported a segment before sending all of that segment's entries (as the client counts
 * them) fails with "Segment N already completed".
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class IterationOnEveryCacheTest extends HotRodTestBase {
   private static final int ENTRIES = 20_000;
   private static final int SEGMENTS = 256;

   private <K, V> RemoteCache<K, V> load(String cacheName, Map<K, V> entries) {
      RemoteCache<K, V> cache = cache(cacheName);
      cache.clear();
      Map<K, V> batch = new HashMap<>();
      for (Map.Entry<K, V> entry : entries.entrySet()) {
         batch.put(entry.getKey(), entry.getValue());
         if (batch.size() == 5_000) {
            cache.putAll(batch);
            batch.clear();
         }
      }
      cache.putAll(batch);
      assertEquals(entries.size(), cache.size());
      return cache;
   }

   private static Map<String, String> strings() {
      Map<String, String> entries = new HashMap<>();
      for (int i = 0; i < ENTRIES; i++) {
         entries.put(String.format("iter-%05d", i), "value-" + i);
      }
      return entries;
   }

   private static <K, V> Map<K, V> drain(CloseableIterator<Map.Entry<K, V>> entries) {
      Map<K, V> seen = new HashMap<>();
      try (entries) {
         while (entries.hasNext()) {
            Map.Entry<K, V> entry = entries.next();
            if (seen.put(entry.getKey(), entry.getValue()) != null) {
               fail("entry iterated twice: " + entry.getKey());
            }
         }
      }
      return seen;
   }

   @ParameterizedTest(name = "cache {0}")
   @ValueSource(strings = {Weft.PROTOSTREAM, Weft.DEFAULT, Weft.TEXT})
   void retrieveEntriesGivesEachEntryOnce(String cacheName) {
      Map<String, String> expected = strings();
      RemoteCache<String, String> cache = load(cacheName, expected);
      assertEquals(expected, drain(cache.retrieveEntries(null, 1000)));
      assertEquals(expected, drain(cache.retrieveEntries(null, 7)), "tiny batches");
      cache.clear();
   }

   @ParameterizedTest(name = "cache {0}")
   @ValueSource(strings = {Weft.PROTOSTREAM, Weft.DEFAULT, Weft.TEXT})
   void keySetEntrySetAndValuesGiveEachEntryOnce(String cacheName) {
      Map<String, String> expected = strings();
      RemoteCache<String, String> cache = load(cacheName, expected);
      Set<String> keys = new HashSet<>();
      try (CloseableIterator<String> iterator = cache.keySet().iterator()) {
         while (iterator.hasNext()) {
            String key = iterator.next();
            assertTrue(keys.add(key), "key iterated twice: " + key);
         }
      }
      assertEquals(expected.keySet(), keys);
      assertEquals(expected, drain(cache.entrySet().iterator()));
      int values = 0;
      try (CloseableIterator<String> iterator = cache.values().iterator()) {
         while (iterator.hasNext()) {
            iterator.next();
            values++;
         }
      }
      assertEquals(ENTRIES, values);
      cache.clear();
   }

   @ParameterizedTest(name = "cache {0}")
   @ValueSource(strings = {Weft.PROTOSTREAM, Weft.DEFAULT, Weft.TEXT})
   void segmentFilteredIterationPartitionsTheCache(String cacheName) {
      Map<String, String> expected = strings();
      RemoteCache<String, String> cache = load(cacheName, expected);
      Map<Object, Object> union = new HashMap<>();
      int groups = 8;
      for (int group = 0; group < groups; group++) {
         Set<Integer> segments = new HashSet<>();
         for (int s = group; s < SEGMENTS; s += groups) {
            segments.add(s);
         }
         Map<Object, Object> part = drain(cache.retrieveEntries(null, segments, 500));
         assertTrue(!part.isEmpty(), "group " + group + " has entries");
         for (Map.Entry<Object, Object> entry : part.entrySet()) {
            assertNull(union.put(entry.getKey(), entry.getValue()),
                  "key " + entry.getKey() + " came in two disjoint segment groups");
         }
      }
      assertEquals(expected, union, "the groups together are the whole cache");
      cache.clear();
   }

   @ParameterizedTest(name = "cache {0}")
   @ValueSource(strings = {Weft.PROTOSTREAM, Weft.DEFAULT})
   void typedKeysAndValuesIterateWithTheirTypes(String cacheName) {
      Map<Object, Object> expected = new HashMap<>();
      for (int i = 0; i < ENTRIES; i++) {
         switch (i % 4) {
            case 0 -> expected.put(i, (long) i * 1_000_000_007L);
            case 1 -> expected.put((long) i, "long key " + i);
            case 2 -> expected.put("string key " + i, i);
            // The printed form of the Integer key three before: a distinct entry.
            default -> expected.put(Integer.toString(i - 3), i % 3 == 0);
         }
      }
      RemoteCache<Object, Object> cache = load(cacheName, expected);
      Map<Object, Object> seen = drain(cache.retrieveEntries(null, 1000));
      assertEquals(expected, seen);
      for (Map.Entry<Object, Object> entry : seen.entrySet()) {
         Object value = expected.get(entry.getKey());
         assertInstanceOf(value.getClass(), entry.getValue(), "value of " + entry.getKey());
      }
      Set<Object> keys = new HashSet<>();
      try (CloseableIterator<Object> iterator = cache.keySet().iterator()) {
         iterator.forEachRemaining(key -> assertTrue(keys.add(key), "key iterated twice: " + key));
      }
      assertEquals(expected.keySet(), keys, "keys keep their Java types (Integer 4 is not \"4\")");
      cache.clear();
   }
}
