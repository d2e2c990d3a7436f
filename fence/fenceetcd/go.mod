module github.com/zkrecipes/zkrecipes/fence/fenceetcd

go 1.26.0

require (
	github.com/zkrecipes/zkrecipes v0.1.0
	go.etcd.io/etcd/api/v3 v3.6.16
	go.etcd.io/etcd/client/v3 v3.6.16
)
