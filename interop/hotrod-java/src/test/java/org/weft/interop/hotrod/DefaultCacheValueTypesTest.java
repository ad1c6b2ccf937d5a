package org.weft.interop.hotrod;

/**
 * Every {@link ValueTypesTest} case on the `default` cache, the one a new user reaches first: it
 * stores application/octet-stream (RESP database 0), and a Java client still reads back the type it
 * wrote — an Integer as an Integer, a byte[] as a byte[] — and an Integer key is not the byte[] key
 * of the same printed form.
 */
class DefaultCacheValueTypesTest extends ValueTypesTest {
   @Override
   protected String cacheName() {
      return Weft.DEFAULT;
   }
}
