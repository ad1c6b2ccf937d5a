package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.Flag;
import org.infinispan.client.hotrod.MetadataValue;
import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.commons.util.CloseableIterator;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Java client (always ProtoStream on the wire) against caches that store other media types:
 * `text` (text/plain) and `default` (application/octet-stream). The server transcodes both ways.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CrossMediaTest extends HotRodTestBase {
   private RemoteCache<String, Object> text;
   private RemoteCache<String, Object> octets;

   @BeforeEach
   void clear() {
      text = cache(Weft.TEXT);
      octets = cache(Weft.DEFAULT);
      text.clear();
      octets.clear();
   }

   private static boolean isUtf8(byte[] bytes) {
      try {
         StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(bytes));
         return true;
      } catch (CharacterCodingException e) {
         return false;
      }
   }

   @Test
   void textCacheRoundTripsStrings() {
      text.put("greeting", "hello");
      text.put("клíč-🔑", "значение ✓");
      text.put("鍵", "値");
      assertEquals("hello", text.get("greeting"));
      assertEquals("значение ✓", text.get("клíč-🔑"));
      assertEquals("値", text.get("鍵"));
      assertEquals(3, text.size());
      assertTrue(text.containsKey("greeting"));
      assertEquals("hello", text.withFlags(Flag.FORCE_RETURN_VALUE).put("greeting", "bye"), "previous value transcoded back");
      assertEquals("bye", text.withFlags(Flag.FORCE_RETURN_VALUE).remove("greeting"));
      assertNull(text.get("greeting"));
   }

   @Test
   void textCacheStoresPlainText() {
      text.put("stored-as-text", "plain words");
      HttpResponse<byte[]> response = Weft.rest("GET", "/rest/v2/caches/text/stored-as-text", null);
      assertEquals(200, response.statusCode());
      assertEquals("plain words", new String(response.body(), StandardCharsets.UTF_8));

      assertEquals(204, Weft.rest("PUT", "/rest/v2/caches/text/from-rest", Weft.utf8("written over http"),
            "Content-Type", "text/plain; charset=UTF-8").statusCode());
      assertEquals("written over http", text.get("from-rest"));
   }

   @Test
   void textCacheVersionedAndIteratedOperations() {
      text.put("k", "v1");
      MetadataValue<Object> metadata = text.getWithMetadata("k");
      assertEquals("v1", metadata.getValue());
      assertTrue(text.replaceWithVersion("k", "v2", metadata.getVersion()));
      assertFalse(text.replaceWithVersion("k", "v3", metadata.getVersion()));
      assertTrue(text.replace("k", "v2", "v4"));
      text.put("other", "x");
      Map<Object, Object> seen = new HashMap<>();
      try (CloseableIterator<Map.Entry<Object, Object>> entries = text.retrieveEntries(null, 10)) {
         entries.forEachRemaining(e -> seen.put(e.getKey(), e.getValue()));
      }
      assertEquals(Map.of("k", "v4", "other", "x"), seen, "iteration transcodes keys and values to ProtoStream");
      assertEquals(Map.of("k", "v4", "other", "x"), text.getAll(Set.of("k", "other", "none")));
   }

   @Test
   void octetStreamCacheRoundTripsStrings() {
      octets.put("s", "a string");
      octets.put("unicode-клíč", "значение-値-🔑");
      assertEquals("a string", octets.get("s"));
      assertEquals("значение-値-🔑", octets.get("unicode-клíč"));
      assertInstanceOf(String.class, octets.get("s"));
      assertEquals(2, octets.size());
   }

   @Test
   void octetStreamCacheRoundTripsBytesThatAreNotUtf8() {
      byte[][] values = {
            {(byte) 0xff, 0x00, (byte) 0xfe, (byte) 0x80},
            {(byte) 0xc3, 0x28},
            {(byte) 0x80},
            {0x41, 0x42, (byte) 0xed, (byte) 0xa0, (byte) 0x80},
      };
      for (int i = 0; i < values.length; i++) {
         assertFalse(isUtf8(values[i]), "test data " + i + " must not be UTF-8");
         octets.put("bin-" + i, values[i]);
      }
      for (int i = 0; i < values.length; i++) {
         Object back = octets.get("bin-" + i);
         assertInstanceOf(byte[].class, back, "bin-" + i);
         assertArrayEquals(values[i], (byte[]) back, "bin-" + i);
      }
   }

   @Test
   void octetStreamCacheConditionalWritesReturnTranscodedValues() {
      assertNull(octets.withFlags(Flag.FORCE_RETURN_VALUE).putIfAbsent("k", "first"));
      assertEquals("first", octets.withFlags(Flag.FORCE_RETURN_VALUE).putIfAbsent("k", "second"));
      assertEquals("first", octets.withFlags(Flag.FORCE_RETURN_VALUE).replace("k", "third"));
      assertEquals("third", octets.withFlags(Flag.FORCE_RETURN_VALUE).put("k", "fourth"));
      assertTrue(octets.replace("k", "fourth", "fifth"));
      assertEquals("fifth", octets.withFlags(Flag.FORCE_RETURN_VALUE).remove("k"));
      assertFalse(octets.containsKey("k"));
   }

   @Test
   void octetStreamCacheBulkOperations() {
      Map<String, Object> entries = new HashMap<>();
      for (int i = 0; i < 200; i++) {
         entries.put("bulk-" + i, "value-" + i);
      }
      octets.putAll(entries);
      assertEquals(entries, octets.getAll(entries.keySet()));
      Map<Object, Object> seen = new HashMap<>();
      try (CloseableIterator<Map.Entry<String, Object>> iterator = octets.entrySet().iterator()) {
         iterator.forEachRemaining(e -> seen.put(e.getKey(), e.getValue()));
      }
      assertEquals(entries, seen);
   }

   @Test
   void theSameKeyInDifferentCachesIsDifferentEntries() {
      RemoteCache<String, Object> proto = cache(Weft.PROTOSTREAM);
      proto.put("shared-name", "in protostream");
      text.put("shared-name", "in text");
      octets.put("shared-name", "in default");
      assertEquals("in protostream", proto.get("shared-name"));
      assertEquals("in text", text.get("shared-name"));
      assertEquals("in default", octets.get("shared-name"));
      proto.remove("shared-name");
      assertEquals("in text", text.get("shared-name"));
   }
}
