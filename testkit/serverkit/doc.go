// Package serverkit holds what every test-server harness and its tests
// share, whatever the backend: the fault proxy, free ports, child
// processes that die with the test binary, and the TestMain that stops
// them and checks for leaked goroutines.
//
// The harnesses (testkit/zktest for ZooKeeper, backend/etcdlock/etcdtest,
// testkit/pgtest, backend/redislock/redistest,
// backend/k8slease/k8stest) start their servers with StartChild on
// FreePorts, pause them with SIGSTOP and WaitStopped, and end their
// Main with Run. Tests put a FaultProxy between a client and its servers
// to cut connections, blackhole them (a partition) or add latency:
//
//	p := serverkit.NewFaultProxy()
//	defer p.Close()
//	rdb := redis.NewClient(&redis.Options{Addr: addr, Dialer: p.DialContext})
//	p.Blackhole() // nothing crosses; the client notices by its timeouts
//	p.Resume()    // the blackholed connections close; new ones flow
//
// A test binary ends with Main or MainThen in TestMain (or the Main of a
// harness, built on Run), which stops the process spawner after the
// tests and fails the binary if goroutines leaked (goleak). Whatever the
// kit starts is gone then: the FaultProxy's goroutines end when it is
// closed, when a fault closes its connections, and when either side
// closes.
//
// The package imports nothing of the repository: every harness builds on
// it, none under it.
package serverkit
