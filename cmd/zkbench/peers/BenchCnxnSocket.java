// Part of the zkbench Curator driver (see Bench.java). It lives in ZooKeeper's
// package because ClientCnxnSocketNIO's constructor and createSock are
// package-private.
package org.apache.zookeeper;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.SocketChannel;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.zookeeper.client.ZKClientConfig;

/**
 * The NIO client socket, bound to a source address 127.0.1.x (40 connections
 * per address) so that 1000 sessions stay under ZooKeeper's maxClientCnxns
 * per address, as zkbench's Go and Python peers do. Selected with
 * -Dzookeeper.clientCnxnSocket=org.apache.zookeeper.BenchCnxnSocket.
 */
public class BenchCnxnSocket extends ClientCnxnSocketNIO {
    private static final AtomicLong SEQ = new AtomicLong();

    public BenchCnxnSocket(ZKClientConfig config) throws IOException {
        super(config);
    }

    @Override
    SocketChannel createSock() throws IOException {
        SocketChannel sock = super.createSock();
        long n = SEQ.incrementAndGet();
        byte last = (byte) (1 + (n / 40) % 250);
        sock.bind(new InetSocketAddress(InetAddress.getByAddress(new byte[] {127, 0, 1, last}), 0));
        return sock;
    }
}
