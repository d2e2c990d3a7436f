// Package k8slease is the Kubernetes backend of zkrecipes: a fenced lock on
// a coordination.k8s.io/v1 Lease object.
package k8slease
