package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * The official client over TLS (interop/hotrod-java/run.sh starts a server with the certificates
 * of interop/tls_files.py and sets WEFT_TLS_DIR): the client verifies the server's certificate
 * against the test CA and works as over plaintext; plaintext clients share the port; a client
 * trusting another CA is refused.
 */
@EnabledIfEnvironmentVariable(named = "WEFT_TLS_DIR", matches = ".+")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TlsTest {
   private static Path dir() {
      return Path.of(System.getenv("WEFT_TLS_DIR"));
   }

   /** A TLS context trusting the certificates of the PEM file `name` in WEFT_TLS_DIR. */
   private static SSLContext trusting(String name) throws Exception {
      KeyStore roots = KeyStore.getInstance(KeyStore.getDefaultType());
      roots.load(null, null);
      try (InputStream in = Files.newInputStream(dir().resolve(name))) {
         int i = 0;
         for (Certificate certificate : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
            roots.setCertificateEntry("ca-" + i++, certificate);
         }
      }
      TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      trust.init(roots);
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(null, trust.getTrustManagers(), null);
      return context;
   }

   private static RemoteCacheManager overTls(SSLContext context) {
      return Weft.manager(builder -> builder
            .connectionTimeout(5_000)
            .socketTimeout(5_000)
            .maxRetries(0)
            .security().ssl().enable().sslContext(context).sniHostName("localhost"));
   }

   // Proves the client's operations work over TLS, and a plaintext client on the same port
   // sees what it wrote.
   @Test
   void operationsOverTls() throws Exception {
      try (RemoteCacheManager secure = overTls(trusting("ca.pem"));
           RemoteCacheManager plain = Weft.manager()) {
         RemoteCache<String, String> cache = secure.getCache();
         String key = Weft.unique("tls");
         assertNull(cache.put(key, "v1"));
         assertEquals("v1", cache.get(key));
         cache.replace(key, "v2");
         assertEquals("v2", cache.get(key));
         Map<String, String> many = new HashMap<>();
         for (int i = 0; i < 200; i++) {
            many.put(key + "-" + i, "x".repeat(i * 50));
         }
         cache.putAll(many);
         assertEquals(many, cache.getAll(many.keySet()));
         RemoteCache<String, String> plainCache = plain.getCache();
         assertEquals("v2", plainCache.get(key));
         cache.remove(key);
         assertNull(plainCache.get(key));
      }
   }

   // Proves the server's certificate is checked: a client trusting another CA cannot operate.
   @Test
   void aClientTrustingAnotherCaIsRefused() throws Exception {
      SSLContext other = trusting("other-ca.pem");
      assertThrows(Exception.class, () -> {
         try (RemoteCacheManager wrong = overTls(other)) {
            RemoteCache<String, String> cache = wrong.getCache();
            cache.put(Weft.unique("tls-refused"), "v");
         }
      });
   }
}
