// Package cache keeps a local copy of a znode, its children or its
// subtree (Curator's CuratorCache), on ZooKeeper 3.6+'s persistent
// recursive watches, or one-shot watches on older servers: a
// recipe.Cache. It reads the nodes through a zookeeper.Stream, which hands
// it the replies to its reads in the order of the watch events around
// them; so, per node, it reports only states the server had, in the
// server's order, and its Snapshot is the server's state at one zxid. After
// a reconnection or a session loss it reads everything again and reports
// only the differences. testkit/cachetest checks it; etcdlock.NewCache is
// the same cache on etcd.
package cache
