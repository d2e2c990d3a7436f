// zkbench driver for Apache Curator's CuratorCache (Debian package
// libcurator-recipes-java), for zkbench -cache (cmd/zkbench/cache.go).
// zkbench compiles it with javac against the jars in /usr/share/java and
// runs it as
//
//   java -Xmx1g -cp ... CacheBench --servers host:port,...
//
// It connects a client, prints {"ready":true}, then answers each line on
// stdin with one JSON line (the protocol of cmd/zkbench/cache_peer.go).
// The loads run on that client; "release" closes it ({"released":true});
// each watch runs on a new client, closed after its end mark. (Curator
// 5.4.0 leaves a CuratorCache's persistent watch on the server when the
// cache closes, which would notify this process during the other peer's
// write phases: a closed session drops it.)
//
//   - "load root=R": builds and starts a CuratorCache of R (data kept, the
//     default), times it from the build to the listener's initialized(),
//     measures the used heap (Runtime totalMemory - freeMemory after
//     System.gc(), five times, the last; noise: the spread of the last
//     three) with the cache loaded less before it, and closes it:
//     {"load_ms":..,"nodes":..,"heap_bytes":..,"heap_noise":..};
//   - "watch root=R": starts a cache of R, waits until initialized, prints
//     {"mark":"start"} and waits for a line; records, for each change event
//     whose data is a write's stamp ("seq sendUnixNs ..."), receive - send
//     time at the write's first sighting and the node's last write; reads
//     "end seq=K", waits until write K is seen, prints {"mark":"end"},
//     waits for a line, closes the cache:
//     {"events":..,"seen":..,"lat_us":[..],"final":{"d00/c00":seq,..}}.
//
// A failed command answers {"error":"..."}.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.cache.ChildData;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;
import org.apache.curator.retry.RetryNTimes;

public class CacheBench {
    static BufferedReader in;
    static String servers = "";
    static CuratorFramework client;

    static void connect() throws Exception {
        client = CuratorFrameworkFactory.builder()
                .connectString(servers)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(15000)
                .retryPolicy(new RetryNTimes(3, 100))
                .build();
        client.start();
        if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
            client.close();
            throw new Exception("not connected within 60 s");
        }
    }

    static void release() {
        if (client != null) client.close();
        client = null;
    }

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--servers")) servers = args[++i];
        }
        connect();
        System.out.println("{\"ready\":true}");
        System.out.flush();
        in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            if (f.length == 0 || f[0].isEmpty()) continue;
            String out;
            try {
                switch (f[0]) {
                    case "load":
                        if (client == null) connect();
                        out = load(f[1].substring("root=".length()));
                        break;
                    case "release":
                        release();
                        out = "{\"released\":true}";
                        break;
                    case "watch":
                        release();
                        connect();
                        try {
                            out = watch(f[1].substring("root=".length()));
                        } finally {
                            release();
                        }
                        break;
                    default:
                        throw new Exception("unknown command " + f[0]);
                }
            } catch (Throwable t) {
                out = "{\"error\":" + quote(t.toString()) + "}";
            }
            System.out.println(out);
            System.out.flush();
        }
        System.exit(0);
    }

    /** The used heap after System.gc(), five times, the last, and the spread of the last three. */
    static long[] settledHeap() throws InterruptedException {
        Runtime rt = Runtime.getRuntime();
        long lo = Long.MAX_VALUE, hi = Long.MIN_VALUE, used = 0;
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(20);
            used = rt.totalMemory() - rt.freeMemory();
            if (i >= 2) {
                lo = Math.min(lo, used);
                hi = Math.max(hi, used);
            }
        }
        return new long[] {used, hi - lo};
    }

    static String load(String root) throws Exception {
        long[] h0 = settledHeap();
        long t0 = System.nanoTime();
        CuratorCache cache = CuratorCache.build(client, root);
        AtomicInteger created = new AtomicInteger();
        CountDownLatch init = new CountDownLatch(1);
        cache.listenable().addListener(new CuratorCacheListener() {
            @Override
            public void event(Type type, ChildData oldData, ChildData data) {
                if (type == Type.NODE_CREATED) created.incrementAndGet();
            }

            @Override
            public void initialized() {
                init.countDown();
            }
        });
        cache.start();
        try {
            if (!init.await(30, TimeUnit.MINUTES)) throw new Exception("not initialized within 30 min");
            double ms = (System.nanoTime() - t0) / 1e6;
            long[] h1 = settledHeap();
            return "{\"load_ms\":" + ms + ",\"nodes\":" + created.get() + ",\"heap_bytes\":" + (h1[0] - h0[0])
                    + ",\"heap_noise\":" + Math.max(h0[1], h1[1]) + "}";
        } finally {
            cache.close();
        }
    }

    /** Receive time, Unix ns (the writer stamps with Go's time.Now().UnixNano()). */
    static long nowNs() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    static String watch(String root) throws Exception {
        CuratorCache cache = CuratorCache.build(client, root);
        CountDownLatch init = new CountDownLatch(1), done = new CountDownLatch(1);
        Object lock = new Object();
        List<Long> lat = new ArrayList<>();
        Set<Long> seen = new HashSet<>();
        Map<String, Long> last = new HashMap<>();
        long[] want = {0}, events = {0};
        String prefix = root + "/";
        cache.listenable().addListener(new CuratorCacheListener() {
            @Override
            public void event(Type type, ChildData oldData, ChildData data) {
                if (type != Type.NODE_CHANGED || data == null || data.getData() == null) return;
                long now = nowNs();
                String[] f = new String(data.getData(), StandardCharsets.US_ASCII).split(" ");
                long seq, sent;
                try {
                    seq = Long.parseLong(f[0]);
                    sent = Long.parseLong(f[1]);
                } catch (RuntimeException e) {
                    return; // not a write's stamp
                }
                if (seq <= 0) return; // a warm-up write
                synchronized (lock) {
                    events[0]++;
                    if (seen.add(seq)) {
                        lat.add((now - sent) / 1000);
                        if (seq == want[0]) done.countDown();
                    }
                    String p = data.getPath();
                    last.put(p.startsWith(prefix) ? p.substring(prefix.length()) : p, seq);
                }
            }

            @Override
            public void initialized() {
                init.countDown();
            }
        });
        cache.start();
        try {
            if (!init.await(30, TimeUnit.MINUTES)) throw new Exception("not initialized within 30 min");
            mark("start");
            String end = in.readLine();
            if (end == null || !end.trim().startsWith("end seq=")) throw new Exception("bad end line " + end);
            long k = Long.parseLong(end.trim().substring("end seq=".length()));
            synchronized (lock) {
                want[0] = k;
                if (k <= 0 || seen.contains(k)) done.countDown();
            }
            if (!done.await(60, TimeUnit.SECONDS)) throw new Exception("write " + k + " not seen a minute after it was made");
            mark("end");
        } finally {
            cache.close(); // after the end mark, as the Go driver's
        }
        synchronized (lock) {
            StringBuilder b = new StringBuilder("{\"events\":").append(events[0]).append(",\"seen\":").append(seen.size());
            b.append(",\"lat_us\":[");
            for (int i = 0; i < lat.size(); i++) b.append(i > 0 ? "," : "").append(lat.get(i));
            b.append("],\"final\":{");
            boolean first = true;
            for (Map.Entry<String, Long> e : last.entrySet()) {
                b.append(first ? "" : ",").append(quote(e.getKey())).append(':').append(e.getValue());
                first = false;
            }
            return b.append("}}").toString();
        }
    }

    /** Marks an edge of the measured phase and waits until zkbench has sampled it. */
    static void mark(String name) throws Exception {
        System.out.println("{\"mark\":\"" + name + "\"}");
        System.out.flush();
        in.readLine();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
