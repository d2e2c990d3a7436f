package main

// untrustedDirMsg is logged when the recipes refused a lock directory that
// someone else made with an ACL letting others create or delete in it
// (zookeeper.ErrUntrustedDir): credentials do not help, its owner must
// remove it or set its ACL.
const untrustedDirMsg = "the path's directory exists with an ACL that lets others create, delete or change ACLs in it, unlike --acl: remove it or set its ACL (zkCli.sh getAcl shows it)"
