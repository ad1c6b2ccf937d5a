package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.ServerStatistics;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The STATS operation (serverStatistics()) on cache `protostream`, whose statistics are on by default. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class StatisticsTest extends HotRodTestBase {
   private RemoteCache<String, String> cache;

   @BeforeEach
   void clear() {
      cache = cache(Weft.PROTOSTREAM);
      cache.clear();
   }

   private static long stat(ServerStatistics stats, String name) {
      String value = stats.getStatistic(name);
      assertNotNull(value, name + " missing from " + stats.getStatsMap());
      return Long.parseLong(value);
   }

   @Test
   void statisticsAreReported() {
      ServerStatistics stats = cache.serverStatistics();
      Map<String, String> map = stats.getStatsMap();
      assertFalse(map.isEmpty(), "no statistics at all");
      assertTrue(stat(stats, ServerStatistics.TIME_SINCE_START) >= 0);
      assertEquals(0, stat(stats, ServerStatistics.CURRENT_NR_OF_ENTRIES), "after clear(): " + map);
      for (String name : new String[] {ServerStatistics.STORES, ServerStatistics.RETRIEVALS, ServerStatistics.HITS,
            ServerStatistics.MISSES, ServerStatistics.REMOVE_HITS, ServerStatistics.REMOVE_MISSES}) {
         assertTrue(stat(stats, name) >= 0, name + " in " + map);
      }
   }

   @Test
   void countersFollowOperations() {
      ServerStatistics before = cache.serverStatistics();
      for (int i = 0; i < 5; i++) {
         cache.put("s" + i, "v");
      }
      cache.get("s0");
      cache.get("s1");
      cache.get("absent");
      cache.remove("s4");
      cache.remove("absent");
      ServerStatistics after = cache.serverStatistics();
      String both = "before " + before.getStatsMap() + "\nafter " + after.getStatsMap();
      assertEquals(4, stat(after, ServerStatistics.CURRENT_NR_OF_ENTRIES), both);
      assertEquals(5, stat(after, ServerStatistics.STORES) - stat(before, ServerStatistics.STORES), both);
      assertEquals(2, stat(after, ServerStatistics.HITS) - stat(before, ServerStatistics.HITS), both);
      assertEquals(1, stat(after, ServerStatistics.MISSES) - stat(before, ServerStatistics.MISSES), both);
      assertEquals(3, stat(after, ServerStatistics.RETRIEVALS) - stat(before, ServerStatistics.RETRIEVALS), both);
      assertEquals(1, stat(after, ServerStatistics.REMOVE_HITS) - stat(before, ServerStatistics.REMOVE_HITS), both);
      assertEquals(1, stat(after, ServerStatistics.REMOVE_MISSES) - stat(before, ServerStatistics.REMOVE_MISSES), both);
      assertTrue(stat(after, ServerStatistics.TIME_SINCE_START) >= stat(before, ServerStatistics.TIME_SINCE_START));
   }
}
