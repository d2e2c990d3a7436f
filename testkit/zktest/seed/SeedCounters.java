// SeedCounters writes a ZooKeeper snapshot whose tree holds persistent
// directories with given child-change counters (cversion), with ZooKeeper's
// own classes (DataTree, FileTxnSnapLog) from the jars the server runs.
// testkit/zktest compiles it once per test process with the javac beside the
// server's java (or runs it with Java's single-file source launcher), on the
// classpath of the server it is about to start, before that server starts:
//
//	java -cp CLASSPATH:CLASSDIR SeedCounters DATADIR HEXPATH=COUNTER...
//	java -cp CLASSPATH SeedCounters.java DATADIR HEXPATH=COUNTER...
//
// HEXPATH is the path's UTF-8 bytes in hexadecimal, so that the path does
// not depend on how the JVM decodes its arguments (the platform charset: a
// C or POSIX locale would turn a non-ASCII path into another one). COUNTER is the suffix the next sequential create in PATH gets (0 to
// 2147483647). Missing parents are created as plain persistent znodes with
// open ACLs. The snapshot goes to DATADIR/version-2 as snapshot.<zxid>,
// where zxid is the last of the zxids (1, 2, ...) given to the changes.
// It prints the snapshot's zxid (hexadecimal) on success; on failure it prints the error
// to standard error and exits with status 1 (2 for bad arguments).

import java.io.File;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.persistence.FileTxnSnapLog;

public class SeedCounters {
    public static void main(String[] args) throws Exception {
        try {
            seed(args);
        } catch (IllegalArgumentException e) {
            System.err.println("SeedCounters: " + e.getMessage());
            System.exit(2);
        }
    }

    static void seed(String[] args) throws Exception {
        if (args.length < 2) {
            throw new IllegalArgumentException("usage: SeedCounters DATADIR HEXPATH=COUNTER...");
        }
        File dataDir = new File(args[0]);
        Map<String, Integer> counters = new LinkedHashMap<>();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].lastIndexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("want HEXPATH=COUNTER, got " + args[i]);
            }
            counters.put(unhex(args[i].substring(0, eq)), Integer.parseInt(args[i].substring(eq + 1)));
        }

        DataTree tree = new DataTree();
        long zxid = 0;
        long now = System.currentTimeMillis();
        // First every directory, parents first: plain persistent znodes
        // (ephemeralOwner 0) with open ACLs, each raising its parent's
        // cversion by one as a create does (parentCVersion -1).
        for (String path : counters.keySet()) {
            for (String p : ancestorsAndSelf(path)) {
                if (tree.getNode(p) == null) {
                    zxid++;
                    tree.createNode(p, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, 0, -1, zxid, now);
                }
            }
        }
        // Then the counters, the way the server replays a create it finds
        // already applied: cversion (and pzxid) only ever rise.
        for (Map.Entry<String, Integer> e : counters.entrySet()) {
            String path = e.getKey();
            int counter = e.getValue();
            int have = tree.getNode(path).stat.getCversion();
            if (counter < have) {
                throw new IllegalArgumentException(path + ": counter " + counter
                        + " is below the " + have + " that creating its seeded children gave it");
            }
            if (counter > have) {
                zxid++;
                tree.setCversionPzxid(path, counter, zxid);
            }
        }
        for (Map.Entry<String, Integer> e : counters.entrySet()) {
            int got = tree.getNode(e.getKey()).stat.getCversion();
            if (got != e.getValue()) {
                throw new IllegalStateException(e.getKey() + ": cversion " + got + " after seeding, want " + e.getValue());
            }
        }
        tree.lastProcessedZxid = zxid;

        FileTxnSnapLog snapLog = new FileTxnSnapLog(dataDir, dataDir);
        try {
            snapLog.save(tree, new ConcurrentHashMap<Long, Integer>(), true);
        } finally {
            snapLog.close();
        }
        System.out.println(Long.toHexString(zxid));
    }

    // ancestorsAndSelf returns "/a", "/a/b", "/a/b/c" for "/a/b/c"; nothing
    // for "/".
    static List<String> ancestorsAndSelf(String path) {
        List<String> out = new ArrayList<>();
        for (int i = 1; i <= path.length(); i++) {
            if (i == path.length() || path.charAt(i) == '/') {
                out.add(path.substring(0, i));
            }
        }
        if (path.equals("/")) {
            out.clear();
        }
        return out;
    }

    // unhex decodes a path given as its UTF-8 bytes in hexadecimal.
    static String unhex(String h) {
        if (h.length() % 2 != 0) {
            throw new IllegalArgumentException("odd-length hexadecimal path " + h);
        }
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(b, java.nio.charset.StandardCharsets.UTF_8);
    }
}
