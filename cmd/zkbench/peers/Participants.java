// zkbench driver for Apache Curator's participant listing (Debian package
// libcurator-recipes-java): LeaderSelector.getParticipants on a directory
// zkbench filled with lock nodes (zkbench -participants, participants.go).
// zkbench compiles it with javac against the jars in /usr/share/java and
// runs it as
//
//   java -Djute.maxbuffer=... -cp ... Participants host:port,... /dir rounds
//
// It lists the directory once unmeasured, then rounds times, printing one
// JSON line per measured listing: {"participants":N,"ms":T}.

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.retry.RetryNTimes;

public class Participants {
    public static void main(String[] args) throws Exception {
        String servers = args[0], dir = args[1];
        int rounds = Integer.parseInt(args[2]);
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(servers)
                .sessionTimeoutMs(30000)
                .retryPolicy(new RetryNTimes(3, 100))
                .build();
        client.start();
        client.blockUntilConnected();
        // Never started: only its participant listing is used.
        LeaderSelector selector = new LeaderSelector(client, dir, new LeaderSelectorListenerAdapter() {
            @Override
            public void takeLeadership(CuratorFramework c) {
            }
        });
        selector.getParticipants(); // warm-up: class loading, JIT
        for (int i = 0; i < rounds; i++) {
            long start = System.nanoTime();
            int n = selector.getParticipants().size();
            double ms = (System.nanoTime() - start) / 1e6;
            System.out.println("{\"participants\":" + n + ",\"ms\":" + ms + "}");
        }
        client.close();
    }
}
