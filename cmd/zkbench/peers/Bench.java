// zkbench driver for Apache Curator's InterProcessMutex (Debian package
// libcurator-recipes-java). zkbench compiles it with javac against the jars in
// /usr/share/java and runs it as
//
//   java -cp ... Bench --servers host:port,... --spread=true|false
//
// It prints {"ready":true}, then for every line "run kind=... clients=...
// waiters=... shared=... duration_ms=... cycles=... path=..." on stdin runs
// the workload and prints one JSON line with ops, seconds, acq_per_s, p50_us,
// p99_us, heap_per_waiter, overlaps, for waiters cycles and capped (and error
// on failure). At the start and the end of each measured phase (a loop
// workload has one, a waiters workload one per cycle: its hand-offs) it
// prints {"mark":"start"} or {"mark":"end"} and waits for a line from
// zkbench, which samples the server's packets and the CPU time of this
// process and of the server meanwhile, and adds the phases up.
// The workloads are those of cmd/zkbench/gopeers.go; see there.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;

public class Bench {
    static String servers = "";
    static final int SESSION_TIMEOUT_MS = 10000;
    static BufferedReader in;

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--servers")) servers = args[++i];
        }
        System.out.println("{\"ready\":true}");
        System.out.flush();
        in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split("\\s+");
            if (f.length == 0 || !f[0].equals("run")) continue;
            Map<String, String> spec = new HashMap<>();
            for (int i = 1; i < f.length; i++) {
                int eq = f[i].indexOf('=');
                spec.put(f[i].substring(0, eq), f[i].substring(eq + 1));
            }
            String out;
            try {
                out = spec.get("kind").equals("loop") ? loop(spec) : waiters(spec);
            } catch (Throwable t) {
                out = "{\"error\":" + quote(t.toString()) + "}";
            }
            System.out.println(out);
            System.out.flush();
        }
        System.exit(0);
    }

    static CuratorFramework connect() throws Exception {
        CuratorFramework c = CuratorFrameworkFactory.builder()
                .connectString(servers)
                .sessionTimeoutMs(SESSION_TIMEOUT_MS)
                .connectionTimeoutMs(15000)
                .retryPolicy(new RetryNTimes(3, 100))
                .build();
        c.start();
        if (!c.blockUntilConnected(60, TimeUnit.SECONDS)) {
            c.close();
            throw new Exception("not connected within 60 s");
        }
        return c;
    }

    static List<CuratorFramework> connectN(int n) throws Exception {
        ExecutorService ex = Executors.newFixedThreadPool(16);
        List<Future<CuratorFramework>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) fs.add(ex.submit(Bench::connect));
        List<CuratorFramework> out = new ArrayList<>();
        Exception first = null;
        for (Future<CuratorFramework> f : fs) {
            try {
                out.add(f.get());
            } catch (Exception e) {
                if (first == null) first = e;
            }
        }
        ex.shutdown();
        if (first != null) {
            closeAll(out);
            throw first;
        }
        return out;
    }

    static void closeAll(List<CuratorFramework> cs) {
        for (CuratorFramework c : cs) c.close();
    }

    /** Marks an edge of a measured phase and waits until zkbench has sampled it (one thread at a time). */
    static synchronized void mark(String name) throws Exception {
        System.out.println("{\"mark\":\"" + name + "\"}");
        System.out.flush();
        in.readLine();
    }

    static long heapUsed() {
        for (int i = 0; i < 3; i++) System.gc();
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    static double pct(List<Long> lat, double q) {
        if (lat.isEmpty()) return 0;
        List<Long> s = new ArrayList<>(lat);
        Collections.sort(s);
        int i = (int) Math.ceil(q * s.size()) - 1;
        i = Math.max(0, Math.min(i, s.size() - 1));
        return s.get(i) / 1000.0;
    }

    /** The result line; cycles and capped only for waiters (cycles > 0). */
    static String result(List<Long> latNs, long elapsedNs, double heap, int overlaps, Throwable err, int cycles, boolean capped) {
        int n = latNs.size();
        double secs = elapsedNs / 1e9;
        StringBuilder b = new StringBuilder("{");
        b.append("\"ops\":").append(n);
        b.append(",\"seconds\":").append(secs);
        b.append(",\"acq_per_s\":").append(secs > 0 ? n / secs : 0);
        b.append(",\"p50_us\":").append(pct(latNs, 0.5));
        b.append(",\"p99_us\":").append(pct(latNs, 0.99));
        b.append(",\"heap_per_waiter\":").append(heap);
        b.append(",\"overlaps\":").append(overlaps);
        if (cycles > 0) b.append(",\"cycles\":").append(cycles).append(",\"capped\":").append(capped);
        if (err != null) b.append(",\"error\":").append(quote(err.toString()));
        return b.append("}").toString();
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

    static String loop(Map<String, String> spec) throws Exception {
        int n = Integer.parseInt(spec.get("clients"));
        String path = spec.get("path");
        long durNs = Long.parseLong(spec.get("duration_ms")) * 1_000_000L;
        List<CuratorFramework> clients = connectN(n);
        try {
            AtomicInteger holders = new AtomicInteger(), overlaps = new AtomicInteger();
            AtomicReference<Throwable> err = new AtomicReference<>();
            List<Long> lat = Collections.synchronizedList(new ArrayList<>());
            mark("start");
            long start = System.nanoTime();
            long deadline = start + durNs;
            List<Thread> ts = new ArrayList<>();
            for (CuratorFramework c : clients) {
                InterProcessMutex m = new InterProcessMutex(c, path);
                Thread t = new Thread(() -> {
                    List<Long> mine = new ArrayList<>();
                    try {
                        while (System.nanoTime() < deadline) {
                            long t0 = System.nanoTime();
                            m.acquire();
                            mine.add(System.nanoTime() - t0);
                            if (holders.incrementAndGet() > 1) overlaps.incrementAndGet(); // the critical section
                            holders.decrementAndGet();
                            m.release();
                        }
                    } catch (Throwable e) {
                        err.compareAndSet(null, e);
                    }
                    lat.addAll(mine);
                });
                ts.add(t);
                t.start();
            }
            for (Thread t : ts) t.join();
            long elapsed = System.nanoTime() - start;
            mark("end");
            return result(lat, elapsed, -1, overlaps.get(), err.get(), 0, false);
        } finally {
            closeAll(clients);
        }
    }

    /**
     * Runs the cycles of a waiters workload on the same sessions, as goPeer.waiters: each cycle the
     * holder acquires, n waiters (new InterProcessMutex objects, new threads) queue behind it, then
     * the hand-offs; the last waiter to hold marks the phase's end before it releases.
     */
    static String waiters(Map<String, String> spec) throws Exception {
        long t0 = System.nanoTime();
        int n = Integer.parseInt(spec.get("waiters"));
        boolean shared = spec.get("shared").equals("true");
        String path = spec.get("path");
        int cycles = Math.max(1, Integer.parseInt(spec.getOrDefault("cycles", "1")));
        long capNs = Long.parseLong(spec.get("duration_ms")) * 1_000_000L;
        CuratorFramework hc = connect();
        List<CuratorFramework> clients = new ArrayList<>();
        List<Thread> ts = new ArrayList<>();
        try {
            List<Long> lat = Collections.synchronizedList(new ArrayList<>());
            AtomicInteger holders = new AtomicInteger(), overlaps = new AtomicInteger();
            AtomicReference<Throwable> err = new AtomicReference<>();
            long handoffNs = 0;
            double heap = -1;
            int done = 0;
            boolean capped = false;
            for (int c = 0; c < cycles && err.get() == null; c++) {
                if (c > 0 && capNs > 0 && System.nanoTime() - t0 >= capNs) {
                    capped = true;
                    break;
                }
                InterProcessMutex holder = new InterProcessMutex(hc, path);
                holder.acquire();
                long heap0 = 0;
                if (c == 0) {
                    heap0 = heapUsed();
                    clients = connectN(shared ? 1 : n);
                }
                AtomicLong lastRelease = new AtomicLong(), lastAcquire = new AtomicLong();
                AtomicInteger acquired = new AtomicInteger();
                ts.clear();
                for (int i = 0; i < n; i++) {
                    InterProcessMutex m = new InterProcessMutex(clients.get(i % clients.size()), path);
                    Thread t = new Thread(null, () -> {
                        try {
                            m.acquire();
                            long now = System.nanoTime();
                            if (holders.incrementAndGet() > 1) overlaps.incrementAndGet(); // the critical section
                            holders.decrementAndGet();
                            lat.add(now - lastRelease.get());
                            if (acquired.incrementAndGet() == n) {
                                lastAcquire.set(now);
                                mark("end");
                            }
                            lastRelease.set(System.nanoTime());
                            m.release();
                        } catch (Throwable e) {
                            err.compareAndSet(null, e);
                        }
                    }, "waiter-" + i, 256 * 1024);
                    ts.add(t);
                    t.start();
                }
                long deadline = System.nanoTime() + 600_000_000_000L;
                while (hc.getChildren().forPath(path).size() < n + 1) {
                    if (System.nanoTime() > deadline || err.get() != null) {
                        throw new Exception("waiters did not queue", err.get());
                    }
                    Thread.sleep(10);
                }
                if (c == 0) heap = (double) (heapUsed() - heap0) / n;
                mark("start");
                long start = System.nanoTime();
                lastRelease.set(start);
                holder.release();
                for (Thread t : ts) t.join();
                if (err.get() == null) {
                    handoffNs += lastAcquire.get() - start;
                    done++;
                }
            }
            return result(lat, handoffNs, heap, overlaps.get(), err.get(), done, capped);
        } finally {
            closeAll(clients);
            hc.close();
            for (Thread t : ts) t.join(10000);
        }
    }
}
