package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * 100,000 entries on cache `protostream`: putAll in batches, getAll, and every way of iterating
 * (ITERATION_START/NEXT/END), including segment-filtered iteration over Infinispan's 256 segments.
 * The entries are loaded once; the tests only read.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BulkAndIterationTest extends HotRodTestBase {
   private static final int ENTRIES = 100_000;
   private static final int SEGMENTS = 256;
   private final Map<String, String> expected = new HashMap<>();
   private RemoteCache<String, String> cache;

   private static String key(int i) {
      return String.format("bulk-%06d", i);
   }

   @BeforeAll
   void load() {
      cache = cache(Weft.PROTOSTREAM);
      cache.clear();
      Map<String, String> batch = new HashMap<>();
      for (int i = 0; i < ENTRIES; i++) {
         String value = "value-" + i + "-" + Integer.toHexString(i * 31);
         expected.put(key(i), value);
         batch.put(key(i), value);
         if (batch.size() == 10_000) {
            cache.putAll(batch);
            batch.clear();
         }
      }
      cache.putAll(batch);
   }

   @AfterAll
   void unload() {
      if (cache != null) {
         cache.clear();
      }
   }

   @Test
   void sizeCountsEveryEntry() {
      assertEquals(ENTRIES, cache.size());
      assertFalse(cache.isEmpty());
      assertEquals(ENTRIES, cache.keySet().size());
      assertEquals(ENTRIES, cache.entrySet().size());
   }

   @Test
   void getAllReturnsEveryEntry() {
      Map<String, String> all = cache.getAll(expected.keySet());
      assertEquals(ENTRIES, all.size());
      assertEquals(expected, all);
   }

   @Test
   void getAllSkipsMissingKeys() {
      Set<String> keys = new HashSet<>();
      Map<String, String> present = new HashMap<>();
      for (int i = 0; i < 1000; i++) {
         keys.add(key(i * 97));
         present.put(key(i * 97), expected.get(key(i * 97)));
         keys.add("missing-" + i);
      }
      assertEquals(present, cache.getAll(keys));
      assertEquals(Map.of(), cache.getAll(Set.of("missing-a", "missing-b")));
   }

   @Test
   void keySetIteration() {
      Set<String> seen = new HashSet<>();
      int count = 0;
      try (CloseableIterator<String> keys = cache.keySet().iterator()) {
         while (keys.hasNext()) {
            String key = keys.next();
            count++;
            if (!seen.add(key)) {
               fail("key iterated twice: " + key);
            }
         }
      }
      assertEquals(ENTRIES, count);
      assertEquals(expected.keySet(), seen);
   }

   @Test
   void entrySetIteration() {
      Map<String, String> seen = new HashMap<>();
      try (CloseableIterator<Map.Entry<String, String>> entries = cache.entrySet().iterator()) {
         while (entries.hasNext()) {
            Map.Entry<String, String> entry = entries.next();
            assertNull(seen.put(entry.getKey(), entry.getValue()), "entry iterated twice: " + entry.getKey());
         }
      }
      assertEquals(expected, seen);
   }

   @Test
   void valuesIteration() {
      Set<String> seen = new HashSet<>();
      int count = 0;
      try (CloseableIterator<String> values = cache.values().iterator()) {
         while (values.hasNext()) {
            seen.add(values.next());
            count++;
         }
      }
      assertEquals(ENTRIES, count);
      assertEquals(new HashSet<>(expected.values()), seen);
   }

   @Test
   void retrieveEntriesInBatches() {
      Map<Object, Object> seen = new HashMap<>();
      try (CloseableIterator<Map.Entry<Object, Object>> entries = cache.retrieveEntries(null, 1000)) {
         while (entries.hasNext()) {
            Map.Entry<Object, Object> entry = entries.next();
            assertNull(seen.put(entry.getKey(), entry.getValue()), "entry iterated twice: " + entry.getKey());
         }
      }
      assertEquals(expected, seen);
   }

   @Test
   void segmentFilteredIterationPartitionsTheCache() {
      Map<Object, Object> union = new HashMap<>();
      int nonEmptySegments = 0;
      for (int segment = 0; segment < SEGMENTS; segment++) {
         int inSegment = 0;
         try (CloseableIterator<Map.Entry<Object, Object>> entries =
                    cache.retrieveEntries(null, Set.of(segment), 500)) {
            while (entries.hasNext()) {
               Map.Entry<Object, Object> entry = entries.next();
               Object previous = union.put(entry.getKey(), entry.getValue());
               if (previous != null) {
                  fail("key " + entry.getKey() + " seen again in segment " + segment + ": segments overlap");
               }
               inSegment++;
            }
         }
         if (inSegment > 0) {
            nonEmptySegments++;
         }
      }
      assertEquals(expected, union, "the union over all " + SEGMENTS + " segments is the whole cache");
      assertTrue(nonEmptySegments >= 1, "some segment has entries");
   }

   @Test
   void iterationWithSeveralSegmentsAtOnce() {
      Set<Integer> firstHalf = new HashSet<>();
      Set<Integer> secondHalf = new HashSet<>();
      for (int s = 0; s < SEGMENTS; s++) {
         (s % 2 == 0 ? firstHalf : secondHalf).add(s);
      }
      Map<Object, Object> a = drain(cache.retrieveEntries(null, firstHalf, 5000));
      Map<Object, Object> b = drain(cache.retrieveEntries(null, secondHalf, 5000));
      Set<Object> overlap = new HashSet<>(a.keySet());
      overlap.retainAll(b.keySet());
      assertTrue(overlap.isEmpty(), overlap.size() + " keys in both halves");
      Map<Object, Object> union = new HashMap<>(a);
      union.putAll(b);
      assertEquals(expected, union);
   }

   @Test
   void closingAnIterationEarlyLeavesTheCacheUsable() {
      for (int round = 0; round < 20; round++) {
         try (CloseableIterator<Map.Entry<Object, Object>> entries = cache.retrieveEntries(null, 100)) {
            for (int i = 0; i < 10; i++) {
               assertTrue(entries.hasNext());
               Map.Entry<Object, Object> entry = entries.next();
               assertEquals(expected.get(entry.getKey()), entry.getValue());
            }
         }
      }
      assertEquals(expected.get(key(5)), cache.get(key(5)));
      assertEquals(ENTRIES, drain(cache.retrieveEntries(null, 10_000)).size());
   }

   @Test
   void keySetContainsAndSmallGets() {
      assertTrue(cache.keySet().contains(key(12345)));
      assertFalse(cache.keySet().contains("bulk-nope"));
      for (int i = 0; i < ENTRIES; i += 9973) {
         assertEquals(expected.get(key(i)), cache.get(key(i)));
      }
   }

   private static Map<Object, Object> drain(CloseableIterator<Map.Entry<Object, Object>> entries) {
      Map<Object, Object> seen = new HashMap<>();
      try (entries) {
         while (entries.hasNext()) {
            Map.Entry<Object, Object> entry = entries.next();
            assertNull(seen.put(entry.getKey(), entry.getValue()), "entry iterated twice: " + entry.getKey());
         }
      }
      return seen;
   }
}
