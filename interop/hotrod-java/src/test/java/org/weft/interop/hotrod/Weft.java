package org.weft.interop.hotrod;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.function.Supplier;

import org.infinispan.client.hotrod.RemoteCacheManager;
import org.infinispan.client.hotrod.configuration.ConfigurationBuilder;

/** Where the server under test is, and the small helpers every test class shares. */
final class Weft {
   static final String HOST = "127.0.0.1";

   /** Caches declared in weft.toml. */
   static final String PROTOSTREAM = "protostream";
   static final String TEXT = "text";
   static final String DEFAULT = "default";

   private static final AtomicLong UNIQUE = new AtomicLong();

   private Weft() {
   }

   /** -Dweft.port, else env WEFT_PORT, else Weft's default port 11222. */
   static int port() {
      String port = System.getProperty("weft.port");
      if (port == null || port.isBlank()) {
         port = System.getenv("WEFT_PORT");
      }
      if (port == null || port.isBlank()) {
         return 11222;
      }
      return Integer.parseInt(port.trim());
   }

   /** A started manager with the client's default configuration, pointed at the server under test. */
   static RemoteCacheManager manager() {
      return manager(builder -> {
      });
   }

   static RemoteCacheManager manager(Consumer<ConfigurationBuilder> customize) {
      ConfigurationBuilder builder = new ConfigurationBuilder();
      builder.addServer().host(HOST).port(port());
      customize.accept(builder);
      return new RemoteCacheManager(builder.build());
   }

   /** A name no other test, run or client profile has used on this server. */
   static String unique(String prefix) {
      return prefix + "-" + Long.toString(System.currentTimeMillis(), 36) + "-" + UNIQUE.incrementAndGet();
   }

   /** Polls cond every 25 ms until it holds; fails with what after timeout. */
   static void await(String what, Duration timeout, BooleanSupplier cond) {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (true) {
         if (cond.getAsBoolean()) {
            return;
         }
         if (System.nanoTime() > deadline) {
            fail("timed out after " + timeout.toMillis() + " ms waiting for: " + what);
         }
         sleep(25);
      }
   }

   /** Polls value until it equals expected; fails showing the last value seen. */
   static <T> void awaitEquals(String what, Duration timeout, Object expected, Supplier<T> value) {
      Object[] last = new Object[1];
      long deadline = System.nanoTime() + timeout.toNanos();
      while (true) {
         last[0] = value.get();
         if (java.util.Objects.equals(expected, last[0])) {
            return;
         }
         if (System.nanoTime() > deadline) {
            fail("timed out after " + timeout.toMillis() + " ms waiting for " + what + " == " + expected
                  + "; last seen: " + last[0]);
         }
         sleep(25);
      }
   }

   static void sleep(long millis) {
      try {
         Thread.sleep(millis);
      } catch (InterruptedException e) {
         Thread.currentThread().interrupt();
         throw new RuntimeException(e);
      }
   }

   static byte[] utf8(String s) {
      return s.getBytes(StandardCharsets.UTF_8);
   }

   // ---------------------------------------------------------------- RESP2 on the same port

   /** An error reply (-ERR ...) from the RESP endpoint. */
   static final class RespError extends RuntimeException {
      RespError(String message) {
         super(message);
      }
   }

   /**
    * A minimal RESP2 client on a plain socket. call() returns byte[] for bulk strings, null for
    * the null bulk string, Long for integers, String for simple strings and List for arrays.
    */
   static final class Resp implements AutoCloseable {
      private final Socket socket;
      private final InputStream in;
      private final OutputStream out;

      Resp() throws IOException {
         socket = new Socket();
         socket.connect(new InetSocketAddress(HOST, port()), 5000);
         socket.setSoTimeout(10_000);
         in = new BufferedInputStream(socket.getInputStream());
         out = socket.getOutputStream();
      }

      Object call(Object... args) throws IOException {
         ByteArrayOutputStream frame = new ByteArrayOutputStream();
         frame.writeBytes(("*" + args.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
         for (Object arg : args) {
            byte[] bytes = arg instanceof byte[] b ? b : utf8(String.valueOf(arg));
            frame.writeBytes(("$" + bytes.length + "\r\n").getBytes(StandardCharsets.US_ASCII));
            frame.writeBytes(bytes);
            frame.writeBytes(new byte[] {'\r', '\n'});
         }
         out.write(frame.toByteArray());
         out.flush();
         return read();
      }

      /** call() for commands answering a bulk string: the reply as UTF-8, or null. */
      String string(Object... args) throws IOException {
         Object reply = call(args);
         if (reply != null && !(reply instanceof byte[])) {
            fail("expected a bulk string from " + List.of(args) + ", got " + reply);
         }
         return reply == null ? null : new String((byte[]) reply, StandardCharsets.UTF_8);
      }

      private Object read() throws IOException {
         int type = in.read();
         String line = line();
         switch (type) {
            case '+':
               return line;
            case '-':
               throw new RespError(line);
            case ':':
               return Long.parseLong(line);
            case '$': {
               int length = Integer.parseInt(line);
               if (length < 0) {
                  return null;
               }
               byte[] data = in.readNBytes(length);
               if (data.length != length || in.read() != '\r' || in.read() != '\n') {
                  throw new IOException("truncated bulk string");
               }
               return data;
            }
            case '*': {
               int count = Integer.parseInt(line);
               if (count < 0) {
                  return null;
               }
               List<Object> items = new ArrayList<>(count);
               for (int i = 0; i < count; i++) {
                  items.add(read());
               }
               return items;
            }
            case '_':
               return null;
            default:
               throw new IOException("unexpected RESP type byte " + type + " (line: " + line + ")");
         }
      }

      private String line() throws IOException {
         ByteArrayOutputStream buffer = new ByteArrayOutputStream();
         int b;
         while ((b = in.read()) != '\r') {
            if (b < 0) {
               throw new IOException("connection closed mid-reply");
            }
            buffer.write(b);
         }
         if (in.read() != '\n') {
            throw new IOException("bad line ending");
         }
         return buffer.toString(StandardCharsets.UTF_8);
      }

      @Override
      public void close() throws IOException {
         socket.close();
      }
   }

   // ---------------------------------------------------------------- REST v2 on the same port

   private static final HttpClient HTTP = HttpClient.newBuilder()
         .version(HttpClient.Version.HTTP_1_1)
         .connectTimeout(Duration.ofSeconds(5))
         .build();

   /** One REST request; headers are name, value pairs. Keys in paths must be URL-safe as given. */
   static HttpResponse<byte[]> rest(String method, String path, byte[] body, String... headers) {
      HttpRequest.Builder request = HttpRequest.newBuilder(URI.create("http://" + HOST + ":" + port() + path))
            .timeout(Duration.ofSeconds(20))
            .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                  : HttpRequest.BodyPublishers.ofByteArray(body));
      for (int i = 0; i < headers.length; i += 2) {
         request.header(headers[i], headers[i + 1]);
      }
      try {
         return HTTP.send(request.build(), HttpResponse.BodyHandlers.ofByteArray());
      } catch (IOException e) {
         throw new RuntimeException(method + " " + path + " failed", e);
      } catch (InterruptedException e) {
         Thread.currentThread().interrupt();
         throw new RuntimeException(e);
      }
   }
}
