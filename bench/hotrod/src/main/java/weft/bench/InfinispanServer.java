package weft.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.Principal;
import java.security.PrivateKey;
import java.security.Security;
import java.security.cert.Certificate;
import java.security.spec.InvalidKeySpecException;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.security.auth.Subject;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.PasswordCallback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.sasl.AuthenticationException;
import javax.security.sasl.AuthorizeCallback;
import javax.security.sasl.RealmCallback;
import javax.security.sasl.SaslException;
import javax.security.sasl.SaslServer;
import javax.security.sasl.SaslServerFactory;

import org.infinispan.commons.dataconversion.MediaType;
import org.infinispan.commons.util.SaslUtils;
import org.infinispan.configuration.cache.CacheMode;
import org.infinispan.configuration.cache.ConfigurationBuilder;
import org.infinispan.configuration.global.GlobalConfigurationBuilder;
import org.infinispan.manager.DefaultCacheManager;
import org.infinispan.persistence.sifs.configuration.SoftIndexFileStoreConfigurationBuilder;
import org.infinispan.server.core.security.SubjectUserInfo;
import org.infinispan.server.core.security.sasl.AuthorizingCallbackHandler;
import org.infinispan.server.core.security.sasl.SaslAuthenticator;
import org.infinispan.server.core.security.sasl.SubjectSaslServer;
import org.infinispan.server.core.security.simple.SimpleSubjectUserInfo;
import org.infinispan.server.core.security.simple.SimpleUserPrincipal;
import org.infinispan.server.hotrod.HotRodServer;
import org.infinispan.server.hotrod.configuration.HotRodServerConfigurationBuilder;
import org.wildfly.security.password.WildFlyElytronPasswordProvider;

/**
 * A real Infinispan embedded Hot Rod server for the benchmark to compare Weft against: one
 * local cache manager with the default cache and a LOCAL cache {@code bench} that stores keys and
 * values as {@code application/x-protostream}, served over Hot Rod on 127.0.0.1.
 *
 * <pre>java -Xmx2g -cp target/hotrod-bench.jar weft.bench.InfinispanServer PORT [--sifs DIR]
 *     [--tls-cert CERT.pem --tls-key KEY.pem] [--user NAME --password-file FILE]</pre>
 *
 * With {@code --sifs DIR} both caches are durable: each gets a SoftIndexFileStore under
 * {@code DIR/<cache>/data} and {@code DIR/<cache>/index} with {@code syncWrites(true)} (a write
 * returns once the store has fsynced it), write-through (no async write-behind), no passivation,
 * no preload, not shared, not purged on startup. Global state is enabled with DIR as its
 * persistent location, so the store locations lie under it.
 *
 * With {@code --tls-cert} and {@code --tls-key} (PEM: a certificate chain, and a PKCS#8 private
 * key as openssl 3 writes it) the endpoint speaks TLS only, through the JDK's TLS: the launcher
 * builds the {@code SSLContext} from the PEM files in memory and hands it to the endpoint's ssl
 * builder, which then needs no keystore file. No client certificate is asked for.
 *
 * With {@code --user NAME --password-file FILE} every client must authenticate with SASL
 * SCRAM-SHA-512 as that user: Elytron's SCRAM server (the one Infinispan Server uses) with
 * {@link OneUser} answering its callbacks. The password is read from the file so that it is on
 * no command line. Authorization stays off: the cache manager has no roles, so an
 * authenticated user may do anything, as in an Infinispan server without RBAC.
 *
 * Prints {@code READY <port>} on stdout once listening; SIGTERM stops the server and the cache
 * manager through a shutdown hook.
 */
public final class InfinispanServer {
    public static void main(String[] args) throws Exception {
        Map<String, String> opts = Map.of();
        try {
            if (args.length < 1) {
                throw new IllegalArgumentException("no port");
            }
            opts = LoadGen.options(args, 1, Set.of("sifs", "tls-cert", "tls-key", "user", "password-file"));
            if (opts.containsKey("tls-cert") != opts.containsKey("tls-key")) {
                throw new IllegalArgumentException("--tls-cert and --tls-key go together");
            }
            if (opts.containsKey("user") != opts.containsKey("password-file")) {
                throw new IllegalArgumentException("--user and --password-file go together");
            }
        } catch (IllegalArgumentException e) {
            System.err.println(e.getMessage());
            System.err.println("usage: InfinispanServer PORT [--sifs DIR] [--tls-cert CERT.pem --tls-key KEY.pem]"
                    + " [--user NAME --password-file FILE]");
            System.exit(2);
        }
        Path sifs = opts.containsKey("sifs") ? Path.of(opts.get("sifs")).toAbsolutePath() : null;
        int port = Integer.parseInt(args[0]);
        LoadGen.quietLogging();

        GlobalConfigurationBuilder global = new GlobalConfigurationBuilder().nonClusteredDefault();
        global.defaultCacheName("default");
        global.jmx().disable();
        if (sifs != null) {
            Files.createDirectories(sifs);
            global.globalState().enable()
                    .persistentLocation(sifs.toString())
                    .temporaryLocation(sifs.resolve("tmp").toString());
        }
        DefaultCacheManager cacheManager = new DefaultCacheManager(global.build(), false);

        ConfigurationBuilder defaults = new ConfigurationBuilder();
        defaults.clustering().cacheMode(CacheMode.LOCAL);
        durable(defaults, sifs, "default");
        cacheManager.defineConfiguration("default", defaults.build());

        ConfigurationBuilder bench = new ConfigurationBuilder();
        bench.clustering().cacheMode(CacheMode.LOCAL);
        bench.encoding().mediaType(MediaType.APPLICATION_PROTOSTREAM_TYPE);
        durable(bench, sifs, "bench");
        cacheManager.defineConfiguration("bench", bench.build());
        cacheManager.start();
        cacheManager.getCache("default");
        cacheManager.getCache("bench");

        HotRodServerConfigurationBuilder endpoint = new HotRodServerConfigurationBuilder()
                .host("127.0.0.1")
                .port(port)
                .defaultCacheName("default");
        if (opts.containsKey("tls-cert")) {
            endpoint.ssl().enable()
                    .sslContext(serverTls(Path.of(opts.get("tls-cert")), Path.of(opts.get("tls-key"))));
        }
        if (opts.containsKey("user")) {
            // Elytron's SCRAM server derives the salted password from the clear one the
            // authenticator gives it through a password factory of Elytron's own provider, which
            // nothing installs in an embedded server (without it every exchange fails with
            // ELY08028: Invalid algorithm "scram-sha-512").
            Security.addProvider(WildFlyElytronPasswordProvider.getInstance());
            endpoint.authentication().enable().sasl()
                    .authenticator(new OneUser(opts.get("user"), LoadGen.password(Path.of(opts.get("password-file")))))
                    .addAllowedMech("SCRAM-SHA-512")
                    .serverName("localhost")
                    .addMechProperty("javax.security.sasl.policy.noanonymous", "true");
        }
        HotRodServer server = new HotRodServer();
        server.start(endpoint.build(), cacheManager);
        server.postStart();

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                server.stop();
                cacheManager.stop();
            } finally {
                stopped.countDown();
            }
        }, "infinispan-shutdown"));

        System.out.println("READY " + server.getPort());
        System.out.flush();
        stopped.await();
    }

    /**
     * One user and its password, for the SASL mechanisms of the server factories on the class path
     * (Elytron's). Infinispan's SimpleSaslAuthenticator cannot serve SCRAM: it looks the user up
     * by the name given in the same callback batch as the password, and Elytron's SCRAM server
     * asks for the name and for the password in two batches ("No matching user found").
     */
    static final class OneUser implements SaslAuthenticator {
        private final String name;
        private final char[] password;

        OneUser(String name, char[] password) {
            this.name = name;
            this.password = password;
        }

        @Override
        public SaslServer createSaslServer(String mechanism, List<Principal> principals, String protocol,
                                           String serverName, Map<String, String> properties) throws SaslException {
            Handler handler = new Handler();
            for (SaslServerFactory factory : SaslUtils.getSaslServerFactories(getClass().getClassLoader(), null, true)) {
                SaslServer server = factory.createSaslServer(mechanism, protocol, serverName, properties, handler);
                if (server != null) {
                    return new SubjectSaslServer(server, principals, handler);
                }
            }
            return null;
        }

        /** One exchange's callbacks: a handler per SaslServer, so it may remember the name given. */
        private final class Handler implements AuthorizingCallbackHandler {
            private String given;

            @Override
            public void handle(Callback[] callbacks) throws IOException, UnsupportedCallbackException {
                for (Callback callback : callbacks) {
                    if (callback instanceof NameCallback nameCallback) {
                        given = nameCallback.getDefaultName();
                        nameCallback.setName(given);
                    } else if (callback instanceof PasswordCallback passwordCallback) {
                        if (!name.equals(given)) {
                            throw new AuthenticationException("no such user");
                        }
                        passwordCallback.setPassword(password);
                    } else if (callback instanceof AuthorizeCallback authorize) {
                        authorize.setAuthorized(authorize.getAuthenticationID().equals(authorize.getAuthorizationID()));
                    } else if (callback instanceof RealmCallback realm) {
                        realm.setText(realm.getDefaultText());
                    } else {
                        throw new UnsupportedCallbackException(callback);
                    }
                }
            }

            @Override
            public SubjectUserInfo getSubjectUserInfo(Collection<Principal> principals) {
                Subject subject = new Subject();
                subject.getPrincipals().add(new SimpleUserPrincipal(given));
                subject.getPrincipals().addAll(principals);
                return new SimpleSubjectUserInfo(given, subject);
            }
        }
    }

    /** A server TLS context presenting the PEM certificate chain with its private key. */
    static SSLContext serverTls(Path certificate, Path key) throws IOException, GeneralSecurityException {
        List<Certificate> chain = LoadGen.certificates(certificate);
        // An in-memory keystore: its password protects nothing, but the API wants one.
        char[] storePassword = "in-memory".toCharArray();
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        store.setKeyEntry("server", privateKey(key), storePassword, chain.toArray(new Certificate[0]));
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, storePassword);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(keys.getKeyManagers(), null, null);
        return context;
    }

    /** The unencrypted PKCS#8 private key ({@code BEGIN PRIVATE KEY}) of a PEM file: EC or RSA. */
    static PrivateKey privateKey(Path pem) throws IOException, GeneralSecurityException {
        String text = Files.readString(pem, StandardCharsets.US_ASCII);
        String begin = "-----BEGIN PRIVATE KEY-----", end = "-----END PRIVATE KEY-----";
        int from = text.indexOf(begin), to = text.indexOf(end);
        if (from < 0 || to < from) {
            throw new InvalidKeySpecException(pem + " holds no unencrypted PKCS#8 key (BEGIN PRIVATE KEY)");
        }
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(
                Base64.getMimeDecoder().decode(text.substring(from + begin.length(), to)));
        for (String algorithm : List.of("EC", "RSA")) {
            try {
                return KeyFactory.getInstance(algorithm).generatePrivate(spec);
            } catch (InvalidKeySpecException e) {
                // Not this algorithm's key: try the next.
            }
        }
        throw new InvalidKeySpecException(pem + " holds a key that is neither EC nor RSA");
    }

    /** With a directory, a synchronous write-through SoftIndexFileStore for the cache. */
    private static void durable(ConfigurationBuilder cache, Path dir, String name) {
        if (dir == null) {
            return;
        }
        cache.persistence().passivation(false);
        SoftIndexFileStoreConfigurationBuilder store = cache.persistence().addSoftIndexFileStore()
                .dataLocation(dir.resolve(name).resolve("data").toString())
                .indexLocation(dir.resolve(name).resolve("index").toString())
                .syncWrites(true)
                .preload(false)
                .shared(false)
                .purgeOnStartup(false);
        store.async().disable();
    }
}
