package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.infinispan.client.hotrod.exceptions.HotRodClientException;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;

/**
 * The official client over TLS and with authentication (interop/hotrod-java/run.sh starts a
 * server with the certificates of interop/tls_files.py, a users file with user `app`, and sets
 * WEFT_TLS_DIR and WEFT_PASSWORD): the client verifies the server's certificate against the
 * test CA and authenticates with SCRAM-SHA-512 or PLAIN over TLS, or SCRAM-SHA-256 in
 * plaintext on the same port; wrong or missing credentials, and a client trusting another CA,
 * are refused; user `viewer` (group observer) reads but may not write; a bearer token
 * (WEFT_TOKEN) authenticates with OAUTHBEARER, a client certificate with EXTERNAL.
 */
@EnabledIfEnvironmentVariable(named = "WEFT_TLS_DIR", matches = ".+")
@Timeout(value = 120, unit = TimeUnit.SECONDS)
// The refusals last: a user that fails again and again from one address is slowed down.
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class TlsTest {
   private static Path dir() {
      return Path.of(System.getenv("WEFT_TLS_DIR"));
   }

   /**
    * A TLS context trusting `ca.pem` that presents the client certificate `client.pem` (CN=app,
    * signed by the test CA) with its key `client.key` (PKCS#8 PEM), from WEFT_TLS_DIR.
    */
   private static SSLContext withClientCertificate() throws Exception {
      String pem = Files.readString(dir().resolve("client.key"));
      String body = pem.replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
      PrivateKey key = KeyFactory.getInstance("EC")
            .generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(body)));
      Certificate[] chain;
      try (InputStream in = Files.newInputStream(dir().resolve("client.pem"))) {
         chain = CertificateFactory.getInstance("X.509").generateCertificates(in).toArray(new Certificate[0]);
      }
      KeyStore identity = KeyStore.getInstance("PKCS12");
      identity.load(null, null);
      identity.setKeyEntry("client", key, new char[0], chain);
      KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
      keys.init(identity, new char[0]);
      SSLContext context = SSLContext.getInstance("TLS");
      TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      trust.init(roots("ca.pem"));
      context.init(keys.getKeyManagers(), trust.getTrustManagers(), null);
      return context;
   }

   private static KeyStore roots(String name) throws Exception {
      KeyStore roots = KeyStore.getInstance(KeyStore.getDefaultType());
      roots.load(null, null);
      try (InputStream in = Files.newInputStream(dir().resolve(name))) {
         int i = 0;
         for (Certificate certificate : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
            roots.setCertificateEntry("ca-" + i++, certificate);
         }
      }
      return roots;
   }

   /** A TLS context trusting the certificates of the PEM file `name` in WEFT_TLS_DIR. */
   private static SSLContext trusting(String name) throws Exception {
      TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      trust.init(roots(name));
      SSLContext context = SSLContext.getInstance("TLS");
      context.init(null, trust.getTrustManagers(), null);
      return context;
   }

   private static final String USER = "app";

   private static String password() {
      return System.getenv("WEFT_PASSWORD");
   }

   private static RemoteCacheManager overTls(SSLContext context, String mechanism, String password) {
      return overTlsAs(USER, context, mechanism, password);
   }

   private static RemoteCacheManager overTlsAs(String user, SSLContext context, String mechanism,
         String password) {
      return Weft.manager(builder -> builder
            .connectionTimeout(5_000)
            .socketTimeout(5_000)
            .maxRetries(0)
            .security()
            .authentication().enable().saslMechanism(mechanism).username(user).password(password)
            .ssl().enable().sslContext(context).sniHostName("localhost"));
   }

   private static RemoteCacheManager plaintext(String mechanism, String password) {
      return Weft.manager(builder -> builder
            .connectionTimeout(5_000)
            .socketTimeout(5_000)
            .maxRetries(0)
            .security()
            .authentication().enable().saslMechanism(mechanism).username(USER).password(password));
   }

   // Proves the client's operations work over TLS with SCRAM-SHA-512 and with PLAIN, and a
   // plaintext client (SCRAM-SHA-256) on the same port sees what they wrote.
   @Test
   @Order(1)
   void operationsOverTls() throws Exception {
      try (RemoteCacheManager secure = overTls(trusting("ca.pem"), "SCRAM-SHA-512", password());
           RemoteCacheManager plainMechanism = overTls(trusting("ca.pem"), "PLAIN", password());
           RemoteCacheManager plain = plaintext("SCRAM-SHA-256", password())) {
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
         assertEquals("v2", plainMechanism.<String, String>getCache().get(key));
         cache.remove(key);
         assertNull(plainCache.get(key));
      }
   }

   // Proves roles reach the client: an observer reads what the application user wrote, and its
   // write is refused with Infinispan's ISPN000287, changing nothing.
   @Test
   @Order(2)
   void anObserverMayReadButNotWrite() throws Exception {
      SSLContext context = trusting("ca.pem");
      String key = Weft.unique("observed");
      try (RemoteCacheManager app = overTls(context, "SCRAM-SHA-512", password());
           RemoteCacheManager viewer = overTlsAs("viewer", context, "SCRAM-SHA-512", password())) {
         app.<String, String>getCache().put(key, "v");
         RemoteCache<String, String> cache = viewer.getCache();
         assertEquals("v", cache.get(key));
         HotRodClientException refused = assertThrows(HotRodClientException.class,
               () -> cache.put(key, "w"));
         assertTrue(refused.getMessage().contains("ISPN000287"), refused.getMessage());
         assertTrue(refused.getMessage().contains("WRITE"), refused.getMessage());
         assertEquals("v", cache.get(key));
      }
   }

   private static RemoteCacheManager withToken(SSLContext context, String token) {
      return Weft.manager(builder -> builder
            .connectionTimeout(5_000)
            .socketTimeout(5_000)
            .maxRetries(0)
            .security()
            .authentication().enable().saslMechanism("OAUTHBEARER").token(token)
            .ssl().enable().sslContext(context).sniHostName("localhost"));
   }

   // Proves SASL OAUTHBEARER with a provider's token (WEFT_TOKEN, user app, group application)
   // over TLS: the client works as that user; a token with a forged signature is refused.
   @Test
   @Order(3)
   void aBearerTokenAuthenticatesOverTls() throws Exception {
      SSLContext context = trusting("ca.pem");
      String token = System.getenv("WEFT_TOKEN");
      String key = Weft.unique("token");
      try (RemoteCacheManager manager = withToken(context, token)) {
         RemoteCache<String, String> cache = manager.getCache();
         assertNull(cache.put(key, "v"));
         assertEquals("v", cache.get(key));
      }
      String forged = token.substring(0, token.lastIndexOf('.') + 1) + "AAAA" + token.substring(token.lastIndexOf('.') + 5);
      assertRefused(() -> withToken(context, forged));
   }

   // Proves SASL EXTERNAL: a client presenting a certificate the client CA signed (CN=app)
   // works as that user, with no password.
   @Test
   @Order(4)
   void aClientCertificateAuthenticatesWithExternal() throws Exception {
      SSLContext context = withClientCertificate();
      String key = Weft.unique("external");
      try (RemoteCacheManager manager = Weft.manager(builder -> builder
            .connectionTimeout(5_000)
            .socketTimeout(5_000)
            .maxRetries(0)
            .security()
            .authentication().enable().saslMechanism("EXTERNAL")
            .ssl().enable().sslContext(context).sniHostName("localhost"))) {
         RemoteCache<String, String> cache = manager.getCache();
         assertNull(cache.put(key, "v"));
         assertEquals("v", cache.get(key));
      }
   }

   // Proves the server's certificate is checked: a client trusting another CA cannot operate.
   @Test
   @Order(5)
   void aClientTrustingAnotherCaIsRefused() throws Exception {
      SSLContext other = trusting("other-ca.pem");
      assertRefused(() -> overTls(other, "SCRAM-SHA-512", password()));
   }

   // Proves a wrong password, and no credentials at all, get nothing done; and PLAIN is not
   // offered in plaintext.
   @Test
   @Order(6)
   void wrongOrMissingCredentialsAreRefused() throws Exception {
      SSLContext context = trusting("ca.pem");
      assertRefused(() -> overTls(context, "SCRAM-SHA-512", "not-" + password()));
      assertRefused(() -> overTls(context, "PLAIN", "not-" + password()));
      assertRefused(() -> plaintext("PLAIN", password()));
      assertRefused(Weft::manager);
   }

   /** The messages of the exception chain `thrown` holds, outermost first. */
   private static java.util.List<String> chain(Throwable thrown) {
      java.util.List<String> messages = new java.util.ArrayList<>();
      for (Throwable cause = thrown; cause != null; cause = cause.getCause()) {
         messages.add(String.valueOf(cause.getMessage()));
      }
      return messages;
   }

   /** What the client throws when `manager` first reaches the server and writes. */
   private static Exception refusal(java.util.function.Supplier<RemoteCacheManager> manager) {
      return assertThrows(Exception.class, () -> {
         try (RemoteCacheManager refused = manager.get()) {
            RemoteCache<String, String> cache = refused.getCache();
            cache.put(Weft.unique("refused"), "v");
         }
      });
   }

   // Proves the client's authentication failures carry Infinispan 15's own words (captured
   // from its server; docs/protocols.md): a wrong SCRAM proof ISPN028027 with Elytron's
   // SaslException, a wrong PLAIN password Elytron's ELY05013, and an operation without
   // authenticating ISPN006017 naming the operation.
   @Test
   @Order(7)
   void authenticationFailuresAreInfinispans() throws Exception {
      SSLContext context = trusting("ca.pem");
      // A user of its own: its failures slow down no one else's logins.
      Exception scram = refusal(() -> overTlsAs("intruder", context, "SCRAM-SHA-512", "not-" + password()));
      assertTrue(chain(scram).contains("java.lang.SecurityException: ISPN028027: Invalid credentials\n"
            + "javax.security.sasl.SaslException: ELY05055: Authentication rejected (invalid proof)"),
            chain(scram).toString());
      Exception plain = refusal(() -> overTlsAs("intruder", context, "PLAIN", "not-" + password()));
      assertTrue(chain(plain).contains(
            "javax.security.sasl.SaslException: ELY05013: Authentication mechanism password not verified"),
            chain(plain).toString());
      try (RemoteCacheManager anonymous = Weft.manager(builder -> builder.maxRetries(0))) {
         RemoteCache<String, String> cache = anonymous.getCache();
         HotRodClientException refused = assertThrows(HotRodClientException.class,
               () -> cache.get("k"));
         assertEquals("java.lang.SecurityException: ISPN006017: Operation 'GET' requires authentication",
               refused.getMessage());
      }
   }

   // Proves authorization failures carry Infinispan's ISPN000287 with the subject as its server
   // prints it, and the permission it names: WRITE for a put, CREATE for a cache from a
   // template, ADMIN for one from a configuration of the client's own.
   @Test
   @Order(8)
   void authorizationFailuresAreInfinispans() throws Exception {
      SSLContext context = trusting("ca.pem");
      String subject = "'Subject with principal(s): [viewer, RolePrincipal{name='observer'}, "
            + "InetAddressPrincipal [address=127.0.0.1/127.0.0.1]]'";
      try (RemoteCacheManager viewer = overTlsAs("viewer", context, "SCRAM-SHA-512", password())) {
         RemoteCache<String, String> cache = viewer.getCache();
         HotRodClientException write = assertThrows(HotRodClientException.class,
               () -> cache.put(Weft.unique("denied"), "v"));
         assertEquals("java.lang.SecurityException: ISPN000287: Unauthorized access: subject " + subject
               + " lacks 'WRITE' permission", write.getMessage());
         HotRodClientException template = assertThrows(HotRodClientException.class,
               () -> viewer.administration().createCache(Weft.unique("denied"), "org.infinispan.LOCAL"));
         String create = "ISPN000287: Unauthorized access: subject " + subject + " lacks 'CREATE' permission";
         assertEquals("org.infinispan.commons.CacheException: " + create + "\njava.lang.SecurityException: "
               + create, template.getMessage());
         String name = Weft.unique("denied");
         HotRodClientException configured = assertThrows(HotRodClientException.class,
               () -> viewer.administration().createCache(name,
                     new org.infinispan.commons.configuration.StringConfiguration(
                           "<local-cache name=\"" + name + "\"/>")));
         assertTrue(configured.getMessage().startsWith("org.infinispan.commons.CacheException: ISPN000287: "
               + "Unauthorized access: subject " + subject + " lacks 'ADMIN' permission"),
               configured.getMessage());
      }
   }

   private static void assertRefused(java.util.function.Supplier<RemoteCacheManager> manager) {
      assertThrows(Exception.class, () -> {
         try (RemoteCacheManager refused = manager.get()) {
            RemoteCache<String, String> cache = refused.getCache();
            cache.put(Weft.unique("refused"), "v");
         }
      });
   }
}
