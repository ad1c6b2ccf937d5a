package weft.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

import org.infinispan.commons.dataconversion.MediaType;
import org.infinispan.configuration.cache.CacheMode;
import org.infinispan.configuration.cache.ConfigurationBuilder;
import org.infinispan.configuration.global.GlobalConfigurationBuilder;
import org.infinispan.manager.DefaultCacheManager;
import org.infinispan.persistence.sifs.configuration.SoftIndexFileStoreConfigurationBuilder;
import org.infinispan.server.hotrod.HotRodServer;
import org.infinispan.server.hotrod.configuration.HotRodServerConfigurationBuilder;

/**
 * A real Infinispan embedded Hot Rod server for the benchmark to compare Weft against: one
 * local cache manager with the default cache and a LOCAL cache {@code bench} that stores keys and
 * values as {@code application/x-protostream}, served over Hot Rod on 127.0.0.1.
 *
 * <pre>java -Xmx2g -cp target/hotrod-bench.jar weft.bench.InfinispanServer PORT [--sifs DIR]</pre>
 *
 * With {@code --sifs DIR} both caches are durable: each gets a SoftIndexFileStore under
 * {@code DIR/<cache>/data} and {@code DIR/<cache>/index} with {@code syncWrites(true)} (a write
 * returns once the store has fsynced it), write-through (no async write-behind), no passivation,
 * no preload, not shared, not purged on startup. Global state is enabled with DIR as its
 * persistent location, so the store locations lie under it.
 *
 * Prints {@code READY <port>} on stdout once listening; SIGTERM stops the server and the cache
 * manager through a shutdown hook.
 */
public final class InfinispanServer {
    public static void main(String[] args) throws Exception {
        Path sifs = null;
        if (args.length == 3 && args[1].equals("--sifs")) {
            sifs = Path.of(args[2]).toAbsolutePath();
        } else if (args.length != 1) {
            System.err.println("usage: InfinispanServer PORT [--sifs DIR]");
            System.exit(2);
        }
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
