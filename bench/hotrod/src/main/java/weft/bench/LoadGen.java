package weft.bench;

import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.logging.Logger;
import java.util.logging.LogManager;
import java.util.logging.Level;
import java.util.logging.Handler;
import java.util.concurrent.atomic.AtomicLong;

import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

import org.HdrHistogram.Histogram;
import org.infinispan.client.hotrod.RemoteCache;
import org.infinispan.client.hotrod.RemoteCacheManager;
import org.infinispan.client.hotrod.configuration.ConfigurationBuilder;

/**
 * Closed-loop Hot Rod load through the official Java client (default ProtoStream marshaller):
 * {@code --threads} threads each loop GET or PUT on String keys {@code key-000000…} with byte[]
 * values, chosen by a per-thread seeded RNG, first for {@code --warmup-seconds} unrecorded, then
 * for {@code --seconds} recorded into a per-thread HdrHistogram. Every loop stops at its deadline
 * or at its share of {@code --max-ops}, whichever comes first. The key space is preloaded with
 * putAll before the warmup, unless {@code --preload false}: then nothing is written beforehand and
 * each operation formats its key from a random index instead of picking it from a table, so the key
 * space can be large (a write-only run, {@code --get-ratio 0 --preload false --keys 100000000},
 * writes mostly distinct keys). Without preload, GETs that find nothing are not counted as misses.
 *
 * <p>Prints one JSON line on stdout:
 * {@code {"threads":N,"value_bytes":B,"ops":…,"ops_per_sec":…,"p50_us":…,"p99_us":…,
 * "p999_us":…,"errors":…,"client_cpu_seconds":…,"get_misses":…}}. {@code ops} counts the
 * measured operations that succeeded; {@code errors} those that threw (not in {@code ops} nor in
 * the latencies); {@code get_misses} counts GETs of a
 * preloaded key that returned nothing or a value of the wrong length; {@code client_cpu_seconds} is
 * this JVM's process CPU time over the measured window. Diagnostics go to stderr, and so do two
 * marker lines at the start and end of the measured window.
 *
 * <p>With {@code --tls-ca FILE} the client speaks TLS, trusting the PEM certificates in FILE and
 * sending {@code --sni-host} (localhost) as the server name, which is also the name the server's
 * certificate must carry. With {@code --user NAME --password-file FILE} it authenticates with SASL
 * {@code --sasl-mechanism} (SCRAM-SHA-512); the password is read from a file so that it is on no
 * command line.
 */
public final class LoadGen {
    private static final int PRELOAD_BATCH = 1000;
    private static final int ERRORS_SHOWN = 5;
    static final String WINDOW_START = "# measured window: start";
    static final String WINDOW_END = "# measured window: end";

    public static void main(String[] argv) throws Exception {
        Map<String, String> opts = parse(argv);
        String host = opts.getOrDefault("host", "127.0.0.1");
        int port = Integer.parseInt(opts.getOrDefault("port", "11222"));
        String cacheName = opts.getOrDefault("cache", "bench");
        int threads = Integer.parseInt(opts.getOrDefault("threads", "1"));
        double seconds = Double.parseDouble(opts.getOrDefault("seconds", "10"));
        double warmupSeconds = Double.parseDouble(opts.getOrDefault("warmup-seconds", "3"));
        int valueBytes = Integer.parseInt(opts.getOrDefault("value-bytes", "100"));
        int keys = Integer.parseInt(opts.getOrDefault("keys", "100000"));
        double getRatio = Double.parseDouble(opts.getOrDefault("get-ratio", "0.8"));
        long maxOps = Long.parseLong(opts.getOrDefault("max-ops", "100000000"));
        long seed = Long.parseLong(opts.getOrDefault("seed", "42"));
        String preloadOpt = opts.getOrDefault("preload", "true");
        if (!preloadOpt.equals("true") && !preloadOpt.equals("false")) {
            usage("--preload takes true or false");
        }
        boolean preload = preloadOpt.equals("true");
        if (threads < 1 || keys < 1 || valueBytes < 0 || seconds <= 0 || warmupSeconds < 0
                || getRatio < 0 || getRatio > 1 || maxOps < threads) {
            usage("invalid option value");
        }
        if (opts.containsKey("user") != opts.containsKey("password-file")) {
            usage("--user and --password-file go together");
        }
        quietLogging();

        ConfigurationBuilder config = new ConfigurationBuilder();
        config.addServer().host(host).port(port);
        // The 15.0 client's pool is unbounded by default (maxActive -1); should that ever change,
        // make sure the pool does not throttle the load threads.
        int maxActive = config.connectionPool().maxActive();
        if (maxActive >= 0 && maxActive < threads) {
            config.connectionPool().maxActive(threads);
        }

        int status;
        RemoteCacheManager manager = null;
        try {
            secure(config, opts);
            manager = new RemoteCacheManager(config.build());
            RemoteCache<String, byte[]> cache = manager.getCache(cacheName);
            if (cache == null) {
                throw new IllegalStateException("server has no cache " + cacheName);
            }
            if (preload) {
                preload(cache, keys, valueBytes, seed);
            }
            status = run(cache, threads, seconds, warmupSeconds, valueBytes, keys, preload, getRatio, maxOps, seed);
        } catch (Exception e) {
            // Reading the TLS or password files, connecting or preloading failed: one line for
            // the driver, the trace after it.
            System.err.println("fatal: " + causes(e));
            e.printStackTrace();
            status = 1;
        } finally {
            if (manager != null) {
                manager.stop();
            }
        }
        System.exit(status);
    }

    /** TLS and SASL authentication as the options ask; neither without them. */
    static void secure(ConfigurationBuilder config, Map<String, String> opts)
            throws IOException, GeneralSecurityException {
        String ca = opts.get("tls-ca");
        if (ca != null) {
            config.security().ssl().enable()
                    .sslContext(trusting(Path.of(ca)))
                    .sniHostName(opts.getOrDefault("sni-host", "localhost"));
        }
        String user = opts.get("user");
        if (user != null) {
            config.security().authentication().enable()
                    .saslMechanism(opts.getOrDefault("sasl-mechanism", "SCRAM-SHA-512"))
                    .username(user)
                    .password(password(Path.of(opts.get("password-file"))));
        }
    }

    /** A TLS context that trusts the certificates of a PEM file (and nothing else). */
    static SSLContext trusting(Path pem) throws IOException, GeneralSecurityException {
        KeyStore roots = KeyStore.getInstance(KeyStore.getDefaultType());
        roots.load(null, null);
        int i = 0;
        for (Certificate certificate : certificates(pem)) {
            roots.setCertificateEntry("ca-" + i++, certificate);
        }
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(roots);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(null, trust.getTrustManagers(), null);
        return context;
    }

    /** The certificates of a PEM file, in order; an error if it holds none. */
    static List<Certificate> certificates(Path pem) throws IOException, GeneralSecurityException {
        try (InputStream in = Files.newInputStream(pem)) {
            List<Certificate> found = new ArrayList<>(CertificateFactory.getInstance("X.509").generateCertificates(in));
            if (found.isEmpty()) {
                throw new GeneralSecurityException("no certificate in " + pem);
            }
            return found;
        }
    }

    /** A password file's content without the line end an editor may have added. */
    static char[] password(Path file) throws IOException {
        return Files.readString(file).strip().toCharArray();
    }

    /** An exception and its causes on one line. */
    static String causes(Throwable e) {
        StringBuilder line = new StringBuilder(String.valueOf(e));
        for (Throwable cause = e.getCause(); cause != null && cause != cause.getCause(); cause = cause.getCause()) {
            line.append(" <- ").append(cause);
        }
        return line.toString();
    }

    static void preload(RemoteCache<String, byte[]> cache, int keys, int valueBytes, long seed) {
        SplittableRandom random = new SplittableRandom(seed);
        Map<String, byte[]> batch = new HashMap<>();
        for (int i = 0; i < keys; i++) {
            byte[] value = new byte[valueBytes];
            random.nextBytes(value);
            batch.put(key(i), value);
            if (batch.size() == PRELOAD_BATCH || i == keys - 1) {
                cache.putAll(batch);
                batch.clear();
            }
        }
    }

    /** {@code key-%06d}, without String.format: it runs per operation when keys are not preloaded. */
    static String key(int i) {
        String digits = Integer.toString(i);
        return digits.length() >= 6 ? "key-" + digits : "key-" + "000000".substring(digits.length()) + digits;
    }

    /** One load thread's counts, written only by that thread and read after it is joined. */
    static final class Worker extends Thread {
        final Histogram histogram = new Histogram(3);
        /** Measured operations that completed, that threw, and GETs that found no right value. */
        long ops, errors, misses, lastDoneNanos;
        private final RemoteCache<String, byte[]> cache;
        private final SplittableRandom random;
        /** The preloaded keys, or null: then a key is formatted from an index below keyCount. */
        private final String[] keys;
        private final int keyCount;
        private final int valueBytes;
        private final double getRatio;
        private final long warmupEnd, measureEnd, maxOps;
        private final AtomicLong errorsShown;

        Worker(int id, RemoteCache<String, byte[]> cache, String[] keys, int keyCount, int valueBytes, double getRatio,
               long seed, long warmupEnd, long measureEnd, long maxOps, AtomicLong errorsShown) {
            super("load-" + id);
            setDaemon(true);
            this.cache = cache;
            this.random = new SplittableRandom(seed * 1_000_003L + id);
            this.keys = keys;
            this.keyCount = keyCount;
            this.valueBytes = valueBytes;
            this.getRatio = getRatio;
            this.warmupEnd = warmupEnd;
            this.measureEnd = measureEnd;
            this.maxOps = maxOps;
            this.errorsShown = errorsShown;
        }

        @Override
        public void run() {
            byte[] value = new byte[valueBytes];
            random.nextBytes(value);
            long warmupAttempts = 0, attempts = 0;
            while (true) {
                long start = System.nanoTime();
                boolean measured = start >= warmupEnd;
                if (start >= measureEnd || (measured ? attempts : warmupAttempts) >= maxOps) {
                    return;
                }
                String key = keys != null ? keys[random.nextInt(keys.length)] : key(random.nextInt(keyCount));
                boolean get = random.nextDouble() < getRatio;
                boolean ok = true, hit = true;
                try {
                    if (get) {
                        byte[] got = cache.get(key);
                        hit = keys == null || (got != null && got.length == valueBytes);
                    } else {
                        if (valueBytes > 0) {
                            value[0]++; // a different value each time, without allocating
                        }
                        cache.put(key, value);
                    }
                } catch (Exception e) {
                    ok = false;
                    if (errorsShown.getAndIncrement() < ERRORS_SHOWN) {
                        System.err.println("error: " + (get ? "GET " : "PUT ") + key + ": " + e);
                    }
                }
                long end = System.nanoTime();
                if (!measured) {
                    warmupAttempts++;
                    if (!ok) {
                        pause();
                    }
                    continue;
                }
                attempts++;
                lastDoneNanos = end;
                if (ok) {
                    ops++;
                    histogram.recordValue(end - start);
                    if (!hit) {
                        misses++;
                    }
                } else {
                    errors++;
                    pause();
                }
            }
        }

        /** After a failed operation, do not spin on a server that is down. */
        private static void pause() {
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    static int run(RemoteCache<String, byte[]> cache, int threads, double seconds, double warmupSeconds,
                   int valueBytes, int keyCount, boolean preloaded, double getRatio, long maxOps, long seed)
            throws Exception {
        String[] keys = null;
        if (preloaded) {
            keys = new String[keyCount];
            for (int i = 0; i < keyCount; i++) {
                keys[i] = key(i);
            }
        }
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        long begin = System.nanoTime() + 50_000_000L; // all threads start together
        long warmupEnd = begin + (long) (warmupSeconds * 1e9);
        long measureEnd = warmupEnd + (long) (seconds * 1e9);
        long perThreadMax = maxOps / threads;
        AtomicLong errorsShown = new AtomicLong();
        Worker[] workers = new Worker[threads];
        for (int i = 0; i < threads; i++) {
            workers[i] = new Worker(i, cache, keys, keyCount, valueBytes, getRatio, seed, warmupEnd, measureEnd,
                    perThreadMax, errorsShown);
        }
        sleepUntil(begin);
        for (Worker worker : workers) {
            worker.start();
        }
        sleepUntil(warmupEnd);
        long cpuBefore = os.getProcessCpuTime();
        // A driver can sample the server's CPU time over the same window on these markers.
        System.err.println(WINDOW_START);
        // A thread stuck in one operation past the deadline gets the client's own timeouts'
        // worth of grace, then the run is reported without it.
        long joinDeadline = measureEnd + 90_000_000_000L;
        int stuck = 0;
        for (Worker worker : workers) {
            long left = joinDeadline - System.nanoTime();
            if (left > 0) {
                worker.join(Math.max(1, left / 1_000_000));
            }
            if (worker.isAlive()) {
                stuck++;
            }
        }
        long cpuAfter = os.getProcessCpuTime();
        System.err.println(WINDOW_END);
        long finished = Math.max(System.nanoTime() > measureEnd ? measureEnd : System.nanoTime(), warmupEnd + 1);

        Histogram all = new Histogram(3);
        long ops = 0, errors = stuck, misses = 0, lastDone = 0;
        for (Worker worker : workers) {
            if (worker.isAlive()) {
                continue;
            }
            all.add(worker.histogram);
            ops += worker.ops;
            errors += worker.errors;
            misses += worker.misses;
            lastDone = Math.max(lastDone, worker.lastDoneNanos);
        }
        // Ops are counted when they start inside the window; the window closes when the last of
        // them completes (or at the deadline if a thread had nothing to do after it).
        double elapsed = (Math.max(lastDone, finished) - warmupEnd) / 1e9;
        double opsPerSec = ops / elapsed;
        System.out.println(String.format(Locale.ROOT,
                "{\"threads\":%d,\"value_bytes\":%d,\"ops\":%d,\"ops_per_sec\":%.1f,\"p50_us\":%.1f,"
                        + "\"p99_us\":%.1f,\"p999_us\":%.1f,\"errors\":%d,\"client_cpu_seconds\":%.3f,"
                        + "\"get_misses\":%d}",
                threads, valueBytes, ops, opsPerSec, micros(all, 50.0), micros(all, 99.0),
                micros(all, 99.9), errors, (cpuAfter - cpuBefore) / 1e9, misses));
        System.out.flush();
        if (stuck > 0) {
            System.err.println("error: " + stuck + " load thread(s) still blocked after the deadline");
            Runtime.getRuntime().halt(3);
        }
        return 0;
    }

    static double micros(Histogram histogram, double percentile) {
        return histogram.getTotalCount() == 0 ? 0.0 : histogram.getValueAtPercentile(percentile) / 1000.0;
    }

    static void sleepUntil(long deadline) throws InterruptedException {
        long left;
        while ((left = deadline - System.nanoTime()) > 0) {
            Thread.sleep(left / 1_000_000, (int) (left % 1_000_000));
        }
    }

    private static final Set<String> OPTIONS = Set.of("host", "port", "cache", "threads", "seconds",
            "warmup-seconds", "value-bytes", "keys", "get-ratio", "max-ops", "seed", "preload", "tls-ca", "sni-host",
            "sasl-mechanism", "user", "password-file");

    static Map<String, String> parse(String[] argv) {
        for (String arg : argv) {
            if (arg.equals("-h") || arg.equals("--help")) {
                usage(null);
            }
        }
        try {
            return options(argv, 0, OPTIONS);
        } catch (IllegalArgumentException e) {
            usage(e.getMessage());
            return Map.of(); // not reached: usage exits
        }
    }

    /**
     * {@code --name value} pairs from {@code argv[from]} on, each name one of {@code names}.
     * Throws IllegalArgumentException naming the first argument that is not such a pair.
     */
    static Map<String, String> options(String[] argv, int from, Set<String> names) {
        Map<String, String> opts = new HashMap<>();
        for (int i = from; i < argv.length; i += 2) {
            String arg = argv[i];
            if (!arg.startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("bad argument " + arg);
            }
            if (!names.contains(arg.substring(2))) {
                throw new IllegalArgumentException("unknown option " + arg);
            }
            opts.put(arg.substring(2), argv[i + 1]);
        }
        return opts;
    }

    static void usage(String problem) {
        if (problem != null) {
            System.err.println(problem);
        }
        System.err.println("usage: LoadGen [--host 127.0.0.1] [--port 11222] [--cache bench] [--threads 1]"
                + " [--seconds 10] [--warmup-seconds 3] [--value-bytes 100] [--keys 100000]"
                + " [--get-ratio 0.8] [--max-ops 100000000] [--seed 42] [--preload true|false]"
                + " [--tls-ca CA.pem [--sni-host localhost]]"
                + " [--user NAME --password-file FILE [--sasl-mechanism SCRAM-SHA-512]]");
        System.exit(problem == null ? 0 : 2);
    }

    /** Infinispan and Netty log through JBoss Logging / java.util.logging: warnings and up only. */
    static void quietLogging() {
        System.setProperty("org.jboss.logging.provider", "jdk");
        Logger root = LogManager.getLogManager().getLogger("");
        root.setLevel(Level.WARNING);
        for (Handler handler : root.getHandlers()) {
            handler.setLevel(Level.WARNING);
        }
    }
}
