module github.com/zkrecipes/zkrecipes

go 1.26

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/go-zookeeper/zk v1.0.4 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
