package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.infinispan.client.hotrod.configuration.NearCacheMode;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Weft-specific: one entry seen through Hot Rod, RESP and REST on the same port. Cache `default`
 * (application/octet-stream) is RESP database 0.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CrossProtocolTest extends HotRodTestBase {
   private RemoteCache<String, Object> cache;
   private Weft.Resp resp;

   @BeforeAll
   void openResp() throws IOException {
      resp = new Weft.Resp();
   }

   @AfterAll
   void closeResp() throws IOException {
      if (resp != null) {
         resp.close();
      }
   }

   @BeforeEach
   void clear() {
      cache = cache(Weft.DEFAULT);
      cache.clear();
   }

   private static String body(HttpResponse<byte[]> response) {
      return new String(response.body(), StandardCharsets.UTF_8);
   }

   @Test
   void hotRodWriteIsReadByResp() throws IOException {
      cache.put("xp-hr-resp", "from hot rod");
      assertEquals("from hot rod", resp.string("GET", "xp-hr-resp"));
      cache.put("xp-клíč", "значение-🔑");
      assertEquals("значение-🔑", resp.string("GET", "xp-клíč"));
      assertEquals(1L, resp.call("EXISTS", "xp-hr-resp"));
   }

   @Test
   void hotRodWriteIsReadByRest() {
      cache.put("xp-hr-rest", "from hot rod");
      HttpResponse<byte[]> response = Weft.rest("GET", "/rest/v2/caches/default/xp-hr-rest", null);
      assertEquals(200, response.statusCode());
      assertEquals("from hot rod", body(response));
   }

   @Test
   void respWriteIsReadByHotRod() throws IOException {
      assertEquals("OK", resp.call("SET", "xp-resp", "from resp"));
      assertEquals("from resp", cache.get("xp-resp"));
      assertEquals(1, cache.size());
   }

   @Test
   void restWriteIsReadByHotRod() {
      HttpResponse<byte[]> put = Weft.rest("PUT", "/rest/v2/caches/default/xp-rest", Weft.utf8("from rest"),
            "Content-Type", "text/plain");
      assertEquals(204, put.statusCode());
      assertEquals("from rest", cache.get("xp-rest"));
   }

   @Test
   void integerWrittenByHotRodIsIncrementedByResp() throws IOException {
      cache.put("xp-counter", 42);
      assertEquals("42", resp.string("GET", "xp-counter"));
      assertEquals(43L, resp.call("INCR", "xp-counter"));
      assertEquals(43, cache.get("xp-counter"), "RESP INCR keeps the Java type the client wrote");
      resp.call("SET", "xp-counter", "44");
      assertEquals("44", cache.get("xp-counter"), "a value RESP writes whole is a string");
   }

   @Test
   void deletesAreSharedBothWays() throws IOException {
      cache.put("xp-del-1", "v");
      assertEquals(1L, resp.call("DEL", "xp-del-1"));
      assertNull(cache.get("xp-del-1"));
      resp.call("SET", "xp-del-2", "v");
      assertNull(cache.remove("xp-del-2"), "remove without FORCE_RETURN_VALUE returns null");
      assertNull(resp.call("GET", "xp-del-2"));
      assertEquals(404, Weft.rest("GET", "/rest/v2/caches/default/xp-del-2", null).statusCode());
   }

   @Test
   void respBinaryValueIsReadAsBytes() throws IOException {
      byte[] binary = {(byte) 0xff, (byte) 0xfe, 0x00, (byte) 0x80};
      resp.call("SET", "xp-binary", binary);
      assertArrayEquals(binary, assertInstanceOf(byte[].class, cache.get("xp-binary")));
      cache.put("xp-binary-2", binary);
      assertArrayEquals(binary, (byte[]) resp.call("GET", "xp-binary-2"));
   }

   @Test
   void restReadsProtostreamCacheAsText() {
      RemoteCache<String, String> proto = cache(Weft.PROTOSTREAM);
      String key = Weft.unique("xp-proto");
      proto.put(key, "protostream value ✓");
      HttpResponse<byte[]> response = Weft.rest("GET", "/rest/v2/caches/protostream/" + key, null, "Accept", "text/plain");
      assertEquals(200, response.statusCode());
      assertEquals("protostream value ✓", body(response));
      proto.remove(key);
      assertEquals(404, Weft.rest("GET", "/rest/v2/caches/protostream/" + key, null, "Accept", "text/plain").statusCode());
   }

   @Test
   void respExpirySeenByHotRodMetadata() throws IOException {
      resp.call("SET", "xp-ttl", "v", "EX", "100");
      assertEquals(100, cache.getWithMetadata("xp-ttl").getLifespan());
      cache.put("xp-ttl-2", "v", 200, TimeUnit.SECONDS);
      long ttl = (Long) resp.call("TTL", "xp-ttl-2");
      assertTrue(ttl > 190 && ttl <= 200, "TTL " + ttl);
   }

   @Test
   void nearCacheIsInvalidatedByRespAndRestWrites() throws IOException {
      try (RemoteCacheManager nearManager = Weft.manager(builder -> builder.remoteCache(Weft.DEFAULT)
            .nearCacheMode(NearCacheMode.INVALIDATED)
            .nearCacheMaxEntries(100))) {
         RemoteCache<String, Object> near = nearManager.getCache(Weft.DEFAULT);
         assertNotNull(near);
         resp.call("SET", "xp-near", "one");
         assertEquals("one", near.get("xp-near"));
         resp.call("SET", "xp-near", "two");
         Weft.awaitEquals("near read after RESP SET", Duration.ofSeconds(5), "two", () -> near.get("xp-near"));
         Weft.rest("PUT", "/rest/v2/caches/default/xp-near", Weft.utf8("three"), "Content-Type", "text/plain");
         Weft.awaitEquals("near read after REST PUT", Duration.ofSeconds(5), "three", () -> near.get("xp-near"));
         resp.call("DEL", "xp-near");
         Weft.awaitEquals("near read after RESP DEL", Duration.ofSeconds(5), null, () -> near.get("xp-near"));
      }
   }
}
