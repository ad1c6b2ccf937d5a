package weft.bench;

import java.util.concurrent.CountDownLatch;

import org.infinispan.commons.dataconversion.MediaType;
import org.infinispan.configuration.cache.CacheMode;
import org.infinispan.configuration.cache.ConfigurationBuilder;
import org.infinispan.configuration.global.GlobalConfigurationBuilder;
import org.infinispan.manager.DefaultCacheManager;
import org.infinispan.server.hotrod.HotRodServer;
import org.infinispan.server.hotrod.configuration.HotRodServerConfigurationBuilder;

/**
 * A real Infinispan embedded Hot Rod server for the benchmark to compare Weft against: one
 * local cache manager with the default cache and a LOCAL cache {@code bench} that stores keys and
 * values as {@code application/x-protostream}, served over Hot Rod on 127.0.0.1.
 *
 * <pre>java -Xmx2g -cp target/hotrod-bench.jar weft.bench.InfinispanServer PORT</pre>
 *
 * Prints {@code READY <port>} on stdout once listening; SIGTERM stops the server and the cache
 * manager through a shutdown hook.
 */
public final class InfinispanServer {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: InfinispanServer PORT");
            System.exit(2);
        }
        int port = Integer.parseInt(args[0]);
        LoadGen.quietLogging();

        GlobalConfigurationBuilder global = new GlobalConfigurationBuilder().nonClusteredDefault();
        global.defaultCacheName("default");
        global.jmx().disable();
        DefaultCacheManager cacheManager = new DefaultCacheManager(global.build(), false);

        ConfigurationBuilder defaults = new ConfigurationBuilder();
        defaults.clustering().cacheMode(CacheMode.LOCAL);
        cacheManager.defineConfiguration("default", defaults.build());

        ConfigurationBuilder bench = new ConfigurationBuilder();
        bench.clustering().cacheMode(CacheMode.LOCAL);
        bench.encoding().mediaType(MediaType.APPLICATION_PROTOSTREAM_TYPE);
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
}
