package org.weft.interop.hotrod;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.Flag;
import org.infinispan.client.hotrod.MetadataValue;
import org.infinispan.client.hotrod.RemoteCache;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A seeded random sequence of single-key operations checked, return value by return value, against
 * a HashMap. The seed is in every failure message; rerun one with -Dweft.seed=N.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RandomizedModelTest extends HotRodTestBase {
   private static final int OPERATIONS = 5000;
   private static final String[] VALUES = {"a", "b", "c", "", "значение", "値", "long-" + "x".repeat(300)};

   private long seed;
   private int step;
   private String op;

   private void check(Object expected, Object actual) {
      if (!Objects.equals(expected, actual)) {
         throw new AssertionError("seed " + seed + ", step " + step + ", " + op + ": expected " + expected + " but got " + actual);
      }
   }

   @ParameterizedTest(name = "cache {0}")
   @ValueSource(strings = {Weft.PROTOSTREAM, Weft.TEXT, Weft.DEFAULT})
   void randomOperationsMatchAHashMap(String cacheName) {
      seed = Long.getLong("weft.seed", 5_000_2024L);
      Random random = new Random(seed);
      RemoteCache<String, String> cache = cache(cacheName);
      cache.clear();
      String prefix = Weft.unique("model");
      Map<String, String> model = new HashMap<>();
      Map<String, Long> seenVersion = new HashMap<>();
      Set<String> writtenSinceSeen = new HashSet<>();

      for (step = 0; step < OPERATIONS; step++) {
         int k = random.nextInt(30);
         String key = k == 0 ? "ключ-🔑" : k == 1 ? "鍵" : prefix + "-" + k;
         String value = random.nextInt(4) == 0 ? VALUES[random.nextInt(VALUES.length)] : "v" + random.nextInt(1000);
         String present = model.get(key);
         int choice = random.nextInt(13);
         switch (choice) {
            case 0 -> {
               op = "put(" + key + ", " + value + ") without flag";
               check(null, cache.put(key, value));
               model.put(key, value);
               writtenSinceSeen.add(key);
            }
            case 1 -> {
               op = "put(" + key + ", " + value + ") FORCE_RETURN_VALUE";
               check(present, cache.withFlags(Flag.FORCE_RETURN_VALUE).put(key, value));
               model.put(key, value);
               writtenSinceSeen.add(key);
            }
            case 2 -> {
               op = "putIfAbsent(" + key + ", " + value + ")";
               check(present, cache.withFlags(Flag.FORCE_RETURN_VALUE).putIfAbsent(key, value));
               if (present == null) {
                  model.put(key, value);
                  writtenSinceSeen.add(key);
               }
            }
            case 3 -> {
               op = "replace(" + key + ", " + value + ")";
               check(present, cache.withFlags(Flag.FORCE_RETURN_VALUE).replace(key, value));
               if (present != null) {
                  model.put(key, value);
                  writtenSinceSeen.add(key);
               }
            }
            case 4 -> {
               op = "remove(" + key + ")";
               check(present, cache.withFlags(Flag.FORCE_RETURN_VALUE).remove(key));
               if (present != null) {
                  model.remove(key);
                  writtenSinceSeen.add(key);
               }
            }
            case 5, 6 -> {
               op = "get(" + key + ")";
               check(present, cache.get(key));
            }
            case 7 -> {
               op = "containsKey(" + key + ")";
               check(present != null, cache.containsKey(key));
            }
            case 8 -> {
               op = "getWithMetadata(" + key + ")";
               MetadataValue<String> metadata = cache.getWithMetadata(key);
               check(present, metadata == null ? null : metadata.getValue());
               if (metadata != null) {
                  seenVersion.put(key, metadata.getVersion());
                  writtenSinceSeen.remove(key);
               }
            }
            case 9 -> {
               Long version = seenVersion.get(key);
               if (version == null) {
                  continue;
               }
               boolean current = present != null && !writtenSinceSeen.contains(key);
               op = "replaceWithVersion(" + key + ", " + value + ", " + version + (current ? " current)" : " stale)");
               check(current, cache.replaceWithVersion(key, value, version));
               if (current) {
                  model.put(key, value);
                  writtenSinceSeen.add(key);
               }
            }
            case 10 -> {
               Long version = seenVersion.get(key);
               if (version == null) {
                  continue;
               }
               boolean current = present != null && !writtenSinceSeen.contains(key);
               op = "removeWithVersion(" + key + ", " + version + (current ? " current)" : " stale)");
               check(current, cache.removeWithVersion(key, version));
               if (current) {
                  model.remove(key);
                  writtenSinceSeen.add(key);
               }
            }
            case 11 -> {
               String expectedOld = random.nextBoolean() && present != null ? present : "not-" + value;
               op = "replace(" + key + ", " + expectedOld + ", " + value + ")";
               boolean matches = expectedOld.equals(present);
               check(matches, cache.replace(key, expectedOld, value));
               if (matches) {
                  model.put(key, value);
                  writtenSinceSeen.add(key);
               }
            }
            default -> {
               op = "size()";
               check(model.size(), cache.size());
            }
         }
      }
      step = OPERATIONS;
      op = "final contents";
      check(model, cache.getAll(model.keySet()));
      check(model.size(), cache.size());
   }
}
