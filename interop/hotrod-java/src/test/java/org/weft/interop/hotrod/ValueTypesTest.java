package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Date;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.infinispan.client.hotrod.Flag;
import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.commons.util.CloseableIterator;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * ProtoStream WrappedMessage primitives as keys and values on cache `protostream`; the same cases run
 * on the out-of-box `default` cache (octet-stream storage) in {@link DefaultCacheValueTypesTest}: a
 * client reads back the Java type it wrote whatever the cache stores.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ValueTypesTest extends HotRodTestBase {
   protected RemoteCache<Object, Object> cache;

   /** The cache the cases run on. */
   protected String cacheName() {
      return Weft.PROTOSTREAM;
   }

   @BeforeEach
   void clear() {
      cache = cache(cacheName());
      cache.clear();
   }

   static Stream<Arguments> primitives() {
      return Stream.of(
            Arguments.of("String", "hello world"),
            Arguments.of("Integer", 42),
            Arguments.of("negative Integer", -1),
            Arguments.of("Integer.MIN_VALUE", Integer.MIN_VALUE),
            Arguments.of("Long", 1L << 40),
            Arguments.of("Long.MIN_VALUE", Long.MIN_VALUE),
            Arguments.of("Boolean", Boolean.TRUE),
            Arguments.of("Boolean false", Boolean.FALSE),
            Arguments.of("Double", 3.5d),
            Arguments.of("negative Double", -1.0e-300),
            Arguments.of("Float", 2.25f),
            Arguments.of("Short", (short) -7),
            Arguments.of("Byte", (byte) 0x7f),
            Arguments.of("Character", 'ж'),
            Arguments.of("Date", new Date(1_700_000_000_123L)));
   }

   @ParameterizedTest(name = "{0}")
   @MethodSource("primitives")
   void valueRoundTrip(String type, Object value) {
      cache.put("key", value);
      Object back = cache.get("key");
      assertEquals(value, back, type);
      assertEquals(value.getClass(), back.getClass(), type + " keeps its Java type");
   }

   @ParameterizedTest(name = "{0} key")
   @MethodSource("primitives")
   void keyRoundTrip(String type, Object key) {
      cache.put(key, "value of " + type);
      assertEquals("value of " + type, cache.get(key), type);
      assertTrue(cache.containsKey(key));
      try (CloseableIterator<Object> keys = cache.keySet().iterator()) {
         assertEquals(key, keys.next(), "iteration gives the key back as " + type);
         assertFalse(keys.hasNext());
      }
      cache.remove(key);
      assertNull(cache.get(key));
   }

   @Test
   void byteArrayValue() {
      byte[] value = {0, 1, 2, (byte) 0xff, (byte) 0x80, 127};
      cache.put("bytes", value);
      Object back = cache.get("bytes");
      assertInstanceOf(byte[].class, back);
      assertArrayEquals(value, (byte[]) back);
   }

   @Test
   void byteArrayKey() {
      cache.put(new byte[] {1, 2, 3}, "by bytes");
      assertEquals("by bytes", cache.get(new byte[] {1, 2, 3}), "an equal but distinct array finds the entry");
      assertNull(cache.get(new byte[] {1, 2, 4}));
   }

   @Test
   void emptyStringAndEmptyBytes() {
      cache.put("empty", "");
      assertEquals("", cache.get("empty"), "an empty string is a value, not an absent one");
      assertTrue(cache.containsKey("empty"));
      cache.put("", "empty key");
      assertEquals("empty key", cache.get(""));
      cache.put("no-bytes", new byte[0]);
      assertInstanceOf(byte[].class, cache.get("no-bytes"), "empty bytes stay bytes, not an empty string");
      assertArrayEquals(new byte[0], (byte[]) cache.get("no-bytes"));
      assertEquals(3, cache.size());
   }

   @Test
   void unicodeKeysAndValues() {
      String[][] pairs = {
            {"клíč-🔑", "значение-✓"},
            {"鍵-キー-열쇠", "値-价值-값"},
            {"emoji-👩‍👩‍👧", "🦀🦀🦀"},
            {"mixed-é\u0000nul", "tab\tnew\nline"},
      };
      for (String[] pair : pairs) {
         cache.put(pair[0], pair[1]);
      }
      for (String[] pair : pairs) {
         assertEquals(pair[1], cache.get(pair[0]), pair[0]);
      }
      assertEquals(pairs.length, cache.size());
      assertEquals("значение-✓", cache.withFlags(Flag.FORCE_RETURN_VALUE).remove("клíč-🔑"));
   }

   @Test
   void typesAreDistinctKeys() {
      // "1", 1, 1L and byte[]{1} marshal differently, so they are four entries.
      cache.put("1", "string");
      cache.put(1, "int");
      cache.put(1L, "long");
      cache.put(new byte[] {1}, "bytes");
      assertEquals(4, cache.size());
      assertEquals("string", cache.get("1"));
      assertEquals("int", cache.get(1));
      assertEquals("long", cache.get(1L));
      assertEquals("bytes", cache.get(new byte[] {1}));
   }

   @Test
   void byteArrayValueThatIsValidUtf8StaysBytes() {
      byte[] value = "plain ascii".getBytes(StandardCharsets.UTF_8);
      cache.put("utf8-bytes", value);
      Object back = cache.get("utf8-bytes");
      assertInstanceOf(byte[].class, back, "a byte[] comes back as byte[] even when its bytes are text");
      assertArrayEquals(value, (byte[]) back);
   }

   @Test
   void integerKeyAndByteArrayKeyOfTheSamePrintedFormAreDistinct() {
      cache.put(1, "int one");
      cache.put(new byte[] {'1'}, "bytes one");
      cache.put(42L, "long forty-two");
      cache.put(new byte[] {'4', '2'}, "bytes forty-two");
      assertEquals(4, cache.size());
      assertEquals("int one", cache.get(1));
      assertEquals("bytes one", cache.get(new byte[] {'1'}));
      assertEquals("long forty-two", cache.get(42L));
      assertEquals("bytes forty-two", cache.get(new byte[] {'4', '2'}));
      assertNull(cache.get(42), "an Integer is not the Long of the same value");
      cache.remove(1);
      assertEquals("bytes one", cache.get(new byte[] {'1'}), "removing the Integer key leaves the byte[] key");
   }

   @Test
   void typedValuesComeBackTypedThroughEveryRead() {
      cache.put("n", 42);
      assertInstanceOf(Integer.class, cache.get("n"));
      assertEquals(42, cache.get("n"));
      assertEquals(42, cache.withFlags(Flag.FORCE_RETURN_VALUE).put("n", 43L), "previous value keeps its type");
      assertEquals(43L, cache.getWithMetadata("n").getValue());
      assertTrue(cache.replace("n", 43L, 44));
      assertEquals(44, cache.get("n"));
      cache.putAll(Map.of("i", 1, "l", 2L, "s", "3", "d", 4.5d, "b", new byte[] {5}));
      Map<Object, Object> all = cache.getAll(Set.of("i", "l", "s", "d"));
      assertEquals(Map.of("i", 1, "l", 2L, "s", "3", "d", 4.5d), all);
      Map<Object, Object> iterated = new HashMap<>();
      try (CloseableIterator<Map.Entry<Object, Object>> entries = cache.retrieveEntries(null, 2)) {
         entries.forEachRemaining(e -> iterated.put(e.getKey(), e.getValue()));
      }
      assertInstanceOf(byte[].class, iterated.remove("b"));
      assertEquals(Map.of("n", 44, "i", 1, "l", 2L, "s", "3", "d", 4.5d), iterated,
            "iteration returns every value with its Java type");
   }

   @Test
   void tenMebibyteValue() {
      byte[] big = new byte[10 * 1024 * 1024];
      new Random(10).nextBytes(big);
      cache.put("big", big);
      byte[] back = (byte[]) cache.get("big");
      assertArrayEquals(big, back);
      big[5_000_000] ^= 1;
      cache.put("big", big);
      assertArrayEquals(big, (byte[]) cache.get("big"), "overwritten with a one-bit change");
      cache.remove("big");
      assertNull(cache.get("big"));
   }

   @Test
   void largeStringValue() {
      String large = "ü".repeat(1 << 20);
      cache.put("large-string", large);
      assertEquals(large, cache.get("large-string"));
   }
}
